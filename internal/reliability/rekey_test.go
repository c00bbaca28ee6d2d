package reliability_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/cmd/flowd/flowdtest"
	"github.com/flowd/flowd/internal/pii"
	"github.com/flowd/flowd/internal/testkit/dbtest"
)

// TestRekeyResumesAfterKillNine: flows sealed under the data key, as
// flowd sealed them before per-person keys, are moved under their people's
// keys by `flowd flows rekey` while flowd serves them. The command (the
// built binary) is killed with SIGKILL half way; what it committed stays
// whole, batch by batch, and a second run moves only what was left. Then
// every flow reads as before, each person has one key, and nothing is
// left under the data key.
func TestRekeyResumesAfterKillNine(t *testing.T) {
	t.Parallel()
	const n, people, batch = 90, 30, 3
	dbURL := dbtest.NewURL(t)
	p := startFlowd(t, dbURL, "", nil)
	tn := newTenant(t, p.Env, "Rekey Bank", "REKEY")
	tok := tn.token(t, p.URL)
	pool := openPool(t, dbURL)
	ctx := context.Background()

	nationalIDs := map[string]string{}
	for i := range n {
		nationalID := fmt.Sprintf("RK%04d", i%people)
		id, _ := createFlow(t, p.URL, tok, nationalID, "")
		nationalIDs[id] = nationalID
	}
	// As flowd sealed them before: under the data key, with no subject key.
	sealer, err := pii.New(mustKey(t, flowdtest.TestDataKey))
	if err != nil {
		t.Fatal(err)
	}
	for id, nationalID := range nationalIDs {
		if _, err := pool.Exec(ctx, `update flows set subject_key_id = null, pii_key_id = $2, national_id_sealed = $3,
			national_id_hmac = $4, last_name_sealed = $5 where id = $1`, id, sealer.KeyID(),
			sealer.Seal(nationalID, "flow:", id, ":", "nationalId"), sealer.Hash("nationalId", nationalID),
			sealer.Seal("Racer", "flow:", id, ":", "lastName")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pool.Exec(ctx, `delete from subject_keys`); err != nil {
		t.Fatal(err)
	}
	// A restarted flowd forgets the keys it held.
	p.kill(t)
	p = startFlowd(t, dbURL, p.Addr, nil)

	cmd := exec.Command(flowdBinary(t), "flows", "rekey", "--batch", fmt.Sprint(batch))
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	for k, v := range p.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Killed once it has said it moved a few batches: mid-run.
	lines := bufio.NewScanner(out)
	var seen []string
	for lines.Scan() {
		seen = append(seen, lines.Text())
		if strings.HasPrefix(lines.Text(), fmt.Sprintf("moved %d of %d", 4*batch, n)) {
			break
		}
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if len(seen) == 0 || seen[0] != fmt.Sprintf("%d flows and uses to move under per-person keys", n) {
		t.Fatalf("the command printed %q", seen)
	}
	moved := count(t, pool, `select count(*) from flows where subject_key_id is not null`)
	if moved < 4*batch || moved == n || moved%batch != 0 {
		t.Fatalf("after the kill %d of %d flows are moved; want whole batches of %d, at least 4, and not all", moved, n, batch)
	}
	// Serving goes on meanwhile: a moved flow and one not moved read alike.
	for id, nationalID := range nationalIDs {
		checkFlow(t, p.URL, tok, id, nationalID)
	}

	got, err := flowdtest.RunCLI(getenvOf(p.Env), "", "flows", "rekey", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var result struct{ Rekeyed int }
	if err := json.Unmarshal([]byte(got), &result); err != nil {
		t.Fatalf("%q: %v", got, err)
	}
	if result.Rekeyed != n-moved {
		t.Errorf("the second run moved %d, want the %d left", result.Rekeyed, n-moved)
	}
	if left := count(t, pool, `select count(*) from flows where subject_key_id is null or pii_key_id = $1`, sealer.KeyID()); left != 0 {
		t.Errorf("%d flows left under the data key", left)
	}
	if keys := count(t, pool, `select count(*) from subject_keys`); keys != people {
		t.Errorf("%d subject keys, want one per person: %d", keys, people)
	}
	if keys := count(t, pool, `select count(distinct subject_key_id) from flows`); keys != people {
		t.Errorf("the flows are under %d keys, want %d", keys, people)
	}
	// A restarted flowd reads every flow under its person's key.
	p.kill(t)
	p = startFlowd(t, dbURL, p.Addr, nil)
	deadline := time.Now().Add(time.Minute)
	for id, nationalID := range nationalIDs {
		checkFlow(t, p.URL, tok, id, nationalID)
		if time.Now().After(deadline) {
			break
		}
	}
}
