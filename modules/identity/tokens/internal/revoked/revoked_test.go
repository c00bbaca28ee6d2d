package revoked

import (
	"strconv"
	"testing"
	"time"
)

// TestRevokedSetFallsBackToTheDatabase checks the set's rules: incomplete
// until loaded, incomplete again when the listener is lost or it is full.
func TestRevokedSetFallsBackToTheDatabase(t *testing.T) {
	t.Parallel()
	r := New()
	now := time.Now()
	if _, complete := r.Has("a"); complete {
		t.Fatal("complete before any load")
	}
	_, epoch := r.NeedsLoad()
	r.Lost()
	r.Loaded(nil, epoch, now)
	if _, complete := r.Has("a"); complete {
		t.Fatal("a load that raced a lost listener made the set complete")
	}
	_, epoch = r.NeedsLoad()
	r.Loaded(nil, epoch, now)
	r.Add("a", now.Add(time.Minute), now)
	if revoked, complete := r.Has("a"); !revoked || !complete {
		t.Fatalf("after a load and an add: revoked %v complete %v", revoked, complete)
	}
	for i := range Max {
		r.Add(strconv.Itoa(i), now.Add(time.Minute), now)
	}
	if _, complete := r.Has("a"); complete {
		t.Fatal("a full set still claims to be complete")
	}
	r.Prune(now.Add(2 * time.Minute))
	if revoked, _ := r.Has("a"); revoked {
		t.Fatal("an expired revocation was kept")
	}
}
