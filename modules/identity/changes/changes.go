// Package changes keeps the identity parts' in-memory copies of their rows
// current on every instance. A part announces a change in the transaction
// that makes it (Notify); PostgreSQL delivers the announcement as that
// transaction commits to every instance's Feed, which hands it to the part
// that subscribed to its topic, and the part drops what it copied.
//
// One Feed, one LISTEN connection, serves every part of an instance: a
// listener holds its connection for the life of the instance, and one per
// part would hold several for the same channel. While the Feed is not
// listening (at start, or after losing its connection) a Cache loads every
// value from the database and keeps none, so that correctness never depends
// on the announcements; parts that keep copies of their own (the revoked
// tokens, the signing keys) learn when listening begins and ends through
// OnListen and OnLost.
package changes

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flowd/flowd/internal/database"
)

// Channel is the PostgreSQL channel the parts announce their changes on.
// Its payloads are a topic, or a topic and a subject ("client:<id>"):
// instances of other versions of flowd read the same channel, so a payload
// keeps its form.
const Channel = "flowd_identity"

// The topics of announcements.
const (
	// TopicClient: an API client's state changed; the subject is its id.
	TopicClient = "client"
	// TopicOrganization: an organization's settings changed; the subject is its id.
	TopicOrganization = "org"
	// TopicExternal: an external issuer's client was mapped or its mapping changed.
	TopicExternal = "external"
	// TopicKeys: the signing keys were rotated.
	TopicKeys = "keys"
	// TopicRevoked: an access token was revoked; the subject is its jti and
	// its expiry in Unix seconds, space-separated.
	TopicRevoked = "jti"
)

// Notify announces a change of topic, about subject when it is not empty,
// when q's transaction commits.
func Notify(ctx context.Context, q database.Querier, topic, subject string) error {
	payload := topic
	if subject != "" {
		payload += ":" + subject
	}
	_, err := q.Exec(ctx, "select pg_notify($1, $2)", Channel, payload)
	return err
}

// Feed listens on Channel for an instance and hands each announcement to
// the part that subscribed to its topic. The parts register while they are
// built, before Run starts.
type Feed struct {
	pool      *pgxpool.Pool
	log       *slog.Logger
	listening atomic.Bool

	mu       sync.Mutex
	topics   map[string][]func(subject string)
	caches   []interface{ ForgetAll() }
	onListen []func(context.Context) error
	onLost   []func()
}

// NewFeed returns the feed of the instance that pool connects.
func NewFeed(pool *pgxpool.Pool, log *slog.Logger) *Feed {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Feed{pool: pool, log: log, topics: map[string][]func(string){}}
}

// Subscribe hands the announcements of topic to changed, with their subject.
func (f *Feed) Subscribe(topic string, changed func(subject string)) {
	f.mu.Lock()
	f.topics[topic] = append(f.topics[topic], changed)
	f.mu.Unlock()
}

// Changed hands a change this instance made to its subscribers at once,
// as if its announcement had arrived: other parts of the instance drop
// what they copied of it before the caller returns.
func (f *Feed) Changed(topic, subject string) {
	f.dispatch(topic, subject)
}

// OnListen runs fn each time the feed begins to listen, after it has
// emptied its caches: a part refreshes what it keeps itself. An error ends
// the connection, which the feed then makes again.
func (f *Feed) OnListen(fn func(context.Context) error) {
	f.mu.Lock()
	f.onListen = append(f.onListen, fn)
	f.mu.Unlock()
}

// OnLost runs fn each time the feed stops listening: from then on,
// announcements may be missed until it listens again.
func (f *Feed) OnLost(fn func()) {
	f.mu.Lock()
	f.onLost = append(f.onLost, fn)
	f.mu.Unlock()
}

// Listening reports whether announcements reach this instance now.
func (f *Feed) Listening() bool { return f.listening.Load() }

// Run listens until ctx ends, connecting again with a backoff when the
// connection is lost; it returns nil once ctx has ended. Without it every
// Cache reads the database on every Get.
func (f *Feed) Run(ctx context.Context) error {
	backoff := time.Second
	for ctx.Err() == nil {
		start := time.Now()
		err := f.listen(ctx)
		f.setListening(false)
		for _, lost := range f.hooks().onLost {
			lost()
		}
		select {
		case <-ctx.Done():
			return nil // told to stop: the lost connection is no failure
		default:
		}
		if time.Since(start) > time.Minute {
			backoff = time.Second
		}
		f.log.WarnContext(ctx, "identity: change listener lost; verifying against the database until it is back", "error", err, "retry_in", backoff.String())
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 30*time.Second)
	}
	return nil
}

// registrations is a copy of what the parts registered.
type registrations struct {
	caches   []interface{ ForgetAll() }
	onListen []func(context.Context) error
	onLost   []func()
}

func (f *Feed) hooks() registrations {
	f.mu.Lock()
	defer f.mu.Unlock()
	return registrations{caches: f.caches, onListen: f.onListen, onLost: f.onLost}
}

// listen holds one connection that LISTENs on Channel and hands out
// announcements as they arrive.
func (f *Feed) listen(ctx context.Context) error {
	pc, err := f.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	conn := pc.Hijack()
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "listen "+Channel); err != nil {
		return err
	}
	f.setListening(true)
	for _, fn := range f.hooks().onListen {
		if err := fn(ctx); err != nil {
			return err
		}
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		topic, subject, _ := strings.Cut(n.Payload, ":")
		f.dispatch(topic, subject)
	}
}

// dispatch hands a change to its topic's subscribers. A topic no part knows
// (from another version of flowd) empties every cache.
func (f *Feed) dispatch(topic, subject string) {
	f.mu.Lock()
	subscribers := f.topics[topic]
	f.mu.Unlock()
	for _, changed := range subscribers {
		changed(subject)
	}
	if len(subscribers) > 0 {
		return
	}
	for _, c := range f.hooks().caches {
		c.ForgetAll()
	}
}

// setListening empties every cache and turns them on or off. Off is
// switched before the caches are emptied, on after: a value loaded while
// announcements may be missed is never kept.
func (f *Feed) setListening(on bool) {
	if !on {
		f.listening.Store(false)
	}
	for _, c := range f.hooks().caches {
		c.ForgetAll()
	}
	if on {
		f.listening.Store(true)
	}
}
