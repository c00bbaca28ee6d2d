package changes

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowd/flowd/internal/testkit/dbtest"
	"github.com/flowd/flowd/internal/testkit/testwait"
)

// counting returns a load of value that counts its calls in n.
func counting(n *int, value int, keep bool) func() (int, bool, error) {
	return func() (int, bool, error) {
		*n++
		return value, keep, nil
	}
}

// TestCacheKeepsValuesOnlyWhileListening: a cache loads every time while
// its feed does not listen, keeps what may be kept while it does, forgets
// on demand, and starts empty whenever listening begins or ends.
func TestCacheKeepsValuesOnlyWhileListening(t *testing.T) {
	t.Parallel()
	feed := NewFeed(nil, nil)
	c := NewCache[string, int](feed, 10)
	var loads int
	get := func(key string, keep bool) int {
		t.Helper()
		v, err := c.Get(key, counting(&loads, len(key), keep))
		if err != nil || v != len(key) {
			t.Fatalf("Get(%q) = %d, %v", key, v, err)
		}
		return loads
	}
	get("a", true)
	if get("a", true) != 2 {
		t.Fatalf("%d loads while not listening, want 2: nothing is kept", loads)
	}
	feed.setListening(true)
	get("a", true)
	if get("a", true) != 3 || !c.Has("a") {
		t.Fatalf("%d loads while listening, want 3: the value is kept", loads)
	}
	get("no", false)
	if get("no", false) != 5 {
		t.Fatalf("%d loads, want 5: a value its load will not have kept is loaded again", loads)
	}
	c.Forget("a")
	if get("a", true) != 6 {
		t.Fatalf("%d loads after Forget, want 6", loads)
	}
	feed.setListening(false)
	if c.Has("a") {
		t.Fatal("a value outlived the end of listening")
	}
	feed.setListening(true)
	if get("a", true) != 7 {
		t.Fatalf("%d loads after listening began again, want 7", loads)
	}
}

// TestALoadThatRacesAForgettingIsNotKept: a value loaded while its key was
// forgotten may be older than the change that made it forgotten.
func TestALoadThatRacesAForgettingIsNotKept(t *testing.T) {
	t.Parallel()
	feed := NewFeed(nil, nil)
	feed.setListening(true)
	c := NewCache[string, string](feed, 10)
	v, err := c.Get("k", func() (string, bool, error) {
		c.Forget("k") // an announcement arrives while the load reads
		return "stale", true, nil
	})
	if err != nil || v != "stale" || c.Has("k") {
		t.Fatalf("Get = %q, %v; kept %v, want the value returned and not kept", v, err, c.Has("k"))
	}
	full := NewCache[int, int](feed, 2)
	for i := range 3 {
		if _, err := full.Get(i, func() (int, bool, error) { return i, true, nil }); err != nil {
			t.Fatal(err)
		}
	}
	if n := full.entries.Len(); n > 2 || !full.Has(2) {
		t.Fatalf("a cache of two kept %d values, the last one %v: want at most two, the last among them", n, full.Has(2))
	}
}

// TestFeedHandsAnnouncementsToTheirTopic runs a feed on a database: an
// announcement committed reaches its topic's subscriber with its subject,
// one of a topic no one subscribed to empties every cache, and the hooks
// run as listening begins and ends.
func TestFeedHandsAnnouncementsToTheirTopic(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	feed := NewFeed(pool, nil)
	c := NewCache[string, int](feed, 10)
	var (
		mu       sync.Mutex
		subjects []string
		listens  atomic.Int32
		losses   atomic.Int32
	)
	feed.Subscribe("client", func(subject string) {
		mu.Lock()
		subjects = append(subjects, subject)
		mu.Unlock()
	})
	feed.OnListen(func(context.Context) error { listens.Add(1); return nil })
	feed.OnLost(func() { losses.Add(1) })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- feed.Run(ctx) }()
	waitFor(t, "the feed to listen", func() bool { return feed.Listening() && listens.Load() == 1 })

	if _, err := c.Get("k", func() (int, bool, error) { return 1, true, nil }); err != nil || !c.Has("k") {
		t.Fatalf("the cache keeps nothing while the feed listens: %v", err)
	}
	if err := Notify(ctx, pool, "client", "fc_1"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the client's announcement", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(subjects) == 1 && subjects[0] == "fc_1"
	})
	if !c.Has("k") {
		t.Fatal("an announcement of a subscribed topic emptied another cache")
	}
	if err := Notify(ctx, pool, "something-new", ""); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "an unknown topic to empty the caches", func() bool { return !c.Has("k") })

	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if feed.Listening() || losses.Load() != 1 {
		t.Fatalf("after Run: listening %v, %d losses, want false and 1", feed.Listening(), losses.Load())
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := testwait.Deadline(t)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited until the test's deadline for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
