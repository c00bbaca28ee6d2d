package store

import (
	"maps"
	"sync"
	"sync/atomic"
)

// symbols holds one string for each value of the columns that take few
// values (statuses, key ids), so that reading them allocates nothing: a
// list page read ten rows of three such strings each, a tenth of the
// page's allocations.
var symbols = &symbolTable{max: 256}

// symbolTable maps a column value's bytes to its one string. Reads look up
// an immutable map without a lock; a new value copies the map.
type symbolTable struct {
	max    int // values kept; beyond, each read makes its own string
	mu     sync.Mutex
	values atomic.Pointer[map[string]string]
}

// get returns b as a string: the kept one when b was seen before.
func (t *symbolTable) get(b []byte) string {
	if m := t.values.Load(); m != nil {
		if s, ok := (*m)[string(b)]; ok { // a lookup by string(b) does not allocate
			return s
		}
	}
	s := string(b)
	t.mu.Lock()
	defer t.mu.Unlock()
	old := t.values.Load()
	if old != nil && len(*old) >= t.max {
		return s
	}
	m := map[string]string{}
	if old != nil {
		m = maps.Clone(*old)
	}
	m[s] = s
	t.values.Store(&m)
	return s
}

// symbol scans a text column into *s through symbols. pgx hands a
// pgtype.BytesScanner the row's own bytes, which get does not keep.
type symbol struct{ s *string }

func (x symbol) ScanBytes(b []byte) error {
	*x.s = symbols.get(b)
	return nil
}
