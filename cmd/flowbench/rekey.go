package main

import (
	"context"
	"fmt"
	"time"
)

// rekeyDeep moves the seeded flows, which COPY seals under the data key as
// flowd did before per-person keys, under their people's keys with the
// command an operator runs after upgrading, and notes how long it took.
// With -against it leaves them as they are: the other build, which takes
// turns on the same database, may not read flows under per-person keys.
func (b *bench) rekeyDeep(ctx context.Context) error {
	if b.o.against != "" {
		b.note("the seeded flows stay under the data key: the -against build may not read them under per-person keys")
		return nil
	}
	start := time.Now()
	var out struct {
		Rekeyed int64 `json:"rekeyed"`
	}
	if err := b.cli(ctx, &out, "flows", "rekey"); err != nil {
		return err
	}
	took := time.Since(start).Round(100 * time.Millisecond)
	b.note("flowd flows rekey moved %d flows under per-person keys in %s", out.Rekeyed, took)
	fmt.Fprintf(b.out, "  flows moved under per-person keys in %s\n", took)
	return nil
}
