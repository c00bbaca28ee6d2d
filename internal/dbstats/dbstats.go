// Package dbstats makes Prometheus collectors of figures that only the
// database knows (a backlog, the depth of a queue). Such a figure is read at
// scrape time, never per request; the read has a short timeout, and its
// result serves the scrapes of the next few seconds, so that several
// Prometheus servers, or one scraping often, do not multiply the queries.
package dbstats

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Defaults of Options.
const (
	DefaultTimeout = 2 * time.Second
	DefaultMaxAge  = 5 * time.Second
)

// Read reads the figures from the database and makes them metrics of the
// collector's descriptions.
type Read func(ctx context.Context) ([]prometheus.Metric, error)

// Options tune a collector; zero values take the defaults.
type Options struct {
	// Name names the figures in the log of a read that failed.
	Name string
	// Timeout bounds one read (DefaultTimeout).
	Timeout time.Duration
	// MaxAge is how long a read's metrics serve later scrapes (DefaultMaxAge).
	MaxAge time.Duration
	// Log hears of a read that failed.
	Log *slog.Logger
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// Collector is a prometheus.Collector of the metrics read reads.
type Collector struct {
	descs []*prometheus.Desc
	read  Read
	opts  Options

	mu     sync.Mutex
	readAt time.Time // zero until a read succeeds, and after one fails
	last   []prometheus.Metric
}

// New returns a collector of descs, whose metrics read reads. When a read
// fails the scrape has none of them: a figure the database could not give
// is absent rather than stale (flowd_db_up says why).
func New(descs []*prometheus.Desc, read Read, opts Options) *Collector {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.MaxAge <= 0 {
		opts.MaxAge = DefaultMaxAge
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Collector{descs: descs, read: read, opts: opts}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

// Collect implements prometheus.Collector. Scrapes that come together wait
// for one read.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.opts.Now()
	if c.readAt.IsZero() || now.Sub(c.readAt) >= c.opts.MaxAge {
		ctx, cancel := context.WithTimeout(context.Background(), c.opts.Timeout)
		metrics, err := c.read(ctx)
		cancel()
		if err != nil {
			c.opts.Log.Warn("metrics: the database did not give "+c.opts.Name, "error", err.Error())
			c.last, c.readAt = nil, time.Time{}
			return
		}
		c.last, c.readAt = metrics, now
	}
	for _, m := range c.last {
		ch <- m
	}
}
