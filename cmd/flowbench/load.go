package main

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"syscall"
	"time"
	"unsafe"
)

// Result is what one scenario measured.
type Result struct {
	Scenario    string  `json:"scenario"`
	Concurrency int     `json:"concurrency"`
	Seconds     float64 `json:"seconds"`
	Requests    int     `json:"requests"`
	Errors      int     `json:"errors"`
	RPS         float64 `json:"rps"`
	P50ms       float64 `json:"p50_ms"`
	P99ms       float64 `json:"p99_ms"`
	MaxMs       float64 `json:"max_ms"`
	PgbenchTPS  float64 `json:"pgbench_tps,omitempty"`
	Ratio       float64 `json:"ratio_to_pgbench,omitempty"`
	PeakRSSMiB  float64 `json:"peak_rss_mib"`
	FirstError  string  `json:"first_error,omitempty"`
	// The webhook scenario's own figures: RPS is its deliveries per second.
	CreatesPerSec    float64 `json:"creates_per_sec,omitempty"`
	DeliveriesPerSec float64 `json:"deliveries_per_sec,omitempty"`
	DrainSeconds     float64 `json:"drain_seconds,omitempty"`
	// CPU per request, in µs, during the HTTP run: flowd's, PostgreSQL's and
	// the load generator's; and during pgbench's run, PostgreSQL's and
	// pgbench's per transaction.
	FlowdCPUus           float64 `json:"flowd_cpu_us_per_request,omitempty"`
	PostgresCPUus        float64 `json:"postgres_cpu_us_per_request,omitempty"`
	LoadCPUus            float64 `json:"load_cpu_us_per_request,omitempty"`
	PgbenchPostgresCPUus float64 `json:"pgbench_postgres_cpu_us_per_tx,omitempty"`
	PgbenchClientCPUus   float64 `json:"pgbench_client_cpu_us_per_tx,omitempty"`
	// FlowdAllocs is flowd's heap allocations per request, from its
	// go_memstats_mallocs_total: what its garbage collector has to follow.
	FlowdAllocs float64 `json:"flowd_allocs_per_request,omitempty"`
	// list-deep's reference: the first page, in turns with the deep one.
	FirstPageRPS   float64 `json:"first_page_rps,omitempty"`
	FirstPageP50ms float64 `json:"first_page_p50_ms,omitempty"`
}

// drive sends requests with the run's concurrency for its whole duration,
// in one stretch, and adds what a request cost each process in CPU.
func (b *bench) drive(ctx context.Context, name string, next nextRequest) Result {
	var s sample
	b.driveSlice(ctx, &s, b.o.duration, next)
	return s.result(name, b.o.concurrency)
}

// driveSlice sends requests with the run's concurrency for d and adds what
// it measured, and the CPU it cost, to s.
func (b *bench) driveSlice(ctx context.Context, s *sample, d time.Duration, next nextRequest) {
	before, mallocs := b.cpuNow(), b.mallocs(ctx)
	s.add(b.load.drive(ctx, d, next))
	s.cpu = s.cpu.add(b.cpuNow().sub(before))
	s.mallocs += b.mallocs(ctx) - mallocs
}

// sample is what one or more stretches of load measured.
type sample struct {
	latencies []time.Duration
	errors    int
	firstErr  string
	elapsed   time.Duration
	cpu       cpuTimes
	mallocs   float64 // flowd's heap allocations
}

func (s *sample) add(o sample) {
	s.latencies = append(s.latencies, o.latencies...)
	s.errors += o.errors
	if s.firstErr == "" {
		s.firstErr = o.firstErr
	}
	s.elapsed += o.elapsed
	s.cpu = s.cpu.add(o.cpu)
	s.mallocs += o.mallocs
}

// result summarizes s: throughput, latency percentiles, CPU per request.
func (s sample) result(name string, concurrency int) Result {
	lat := slices.Clone(s.latencies)
	slices.Sort(lat)
	r := Result{Scenario: name, Concurrency: concurrency, Seconds: s.elapsed.Seconds(), Requests: len(lat),
		Errors: s.errors, FirstError: s.firstErr}
	if len(lat) == 0 {
		return r
	}
	n := float64(len(lat))
	r.RPS = n / s.elapsed.Seconds()
	r.P50ms = ms(percentile(lat, 0.50))
	r.P99ms = ms(percentile(lat, 0.99))
	r.MaxMs = ms(lat[len(lat)-1])
	r.FlowdCPUus, r.PostgresCPUus, r.LoadCPUus = perCall(s.cpu.flowd, n), perCall(s.cpu.postgres, n), perCall(s.cpu.load, n)
	r.FlowdAllocs = s.mallocs / n
	return r
}

// load is the load generator: its workers' connections, driven by one
// event loop. With a loop per core, each woke for fewer answers, and the
// generator took 26 µs of CPU per request instead of 18.
type load struct {
	loop  *eventLoop
	conns []*loadConn
}

func newLoad(base string, concurrency int) (*load, error) {
	loop, err := newEventLoop(base)
	if err != nil {
		return nil, err
	}
	l := &load{loop: loop}
	for w := range max(1, concurrency) {
		l.conns = append(l.conns, &loadConn{worker: w, fd: -1})
	}
	return l, nil
}

func (l *load) close() { l.loop.close() }

// drive sends every worker's requests, one at a time each, for d, and
// measures each.
func (l *load) drive(ctx context.Context, d time.Duration, next nextRequest) sample {
	runtime.LockOSThread() // the loop blocks its thread in epoll_wait
	defer runtime.UnlockOSThread()
	start := time.Now()
	deadline := start.Add(d)
	s := l.loop.run(ctx, l.conns, deadline, next)
	s.elapsed = deadline.Sub(start)
	return s
}

// drainTimeout bounds the wait for the answers still out at a run's end.
const drainTimeout = 30 * time.Second

// run drives conns until deadline: each sends its worker's next request as
// soon as the last is answered. Answers that come after the deadline are
// read, so that the connection is ready for the next run, but not counted:
// a request cut short by the end of the run does not count.
func (l *eventLoop) run(ctx context.Context, conns []*loadConn, deadline time.Time, next nextRequest) sample {
	var s sample
	fail := func(err error) {
		s.errors++
		if s.firstErr == "" {
			s.firstErr = err.Error()
		}
	}
	var idle []*loadConn // workers whose last request failed: they try again after the next wait
	start := func(c *loadConn) {
		req, err := next(c.worker, c.calls)
		c.calls++
		if err == nil {
			c.req = req
			l.encode(c, req)
			err = l.send(c)
		}
		if err != nil {
			fail(err)
			l.hangUp(c)
			idle = append(idle, c)
		}
	}
	events := make([]syscall.EpollEvent, len(conns))
	l.dropClosed(events)
	for _, c := range conns {
		start(c)
	}
	drainUntil := deadline.Add(drainTimeout)
	for {
		now := time.Now()
		busy := 0
		for _, c := range conns {
			if c.busy {
				busy++
			}
		}
		if ctx.Err() != nil || now.After(drainUntil) || (!now.Before(deadline) && busy == 0) {
			break
		}
		if now.Before(deadline) {
			retry := idle
			idle = nil
			for _, c := range retry {
				start(c)
			}
		}
		wait := deadline.Sub(now)
		if wait <= 0 {
			wait = drainUntil.Sub(now)
		}
		if len(idle) > 0 {
			wait = min(wait, 10*time.Millisecond)
		}
		n, err := l.wait(events, int(wait.Milliseconds())+1)
		if err != nil {
			if errors.Is(err, syscall.EINTR) {
				continue
			}
			fail(err)
			break
		}
		for _, ev := range events[:n] {
			c := l.conns[int(ev.Fd)]
			if c == nil {
				continue
			}
			if !c.busy { // an idle connection that flowd closed
				l.hangUp(c)
				continue
			}
			if ev.Events&syscall.EPOLLOUT != 0 {
				if err := l.flush(c); err != nil {
					fail(err)
					l.hangUp(c)
					idle = append(idle, c)
					continue
				}
			}
			status, body, done, err := l.receive(c)
			if errors.Is(err, errRetry) {
				l.hangUp(c)
				if err = l.send(c); err == nil {
					continue
				}
			}
			if err != nil {
				if time.Now().Before(deadline) {
					fail(err)
				}
				l.hangUp(c)
				idle = append(idle, c)
				continue
			}
			if !done {
				continue
			}
			end := time.Now()
			c.busy, c.reused = false, true
			if end.Before(deadline) {
				s.latencies = append(s.latencies, end.Sub(c.start))
				if status != c.req.want {
					fail(fmt.Errorf("%s %s: %d %s", c.req.method, c.req.path, status, truncate(body, 200)))
				} else if c.req.done != nil {
					if err := c.req.done(body); err != nil {
						fail(err)
					}
				}
			}
			if closes(c.in) {
				l.hangUp(c)
			}
			if end.Before(deadline) {
				start(c)
			}
		}
	}
	for _, c := range conns {
		if c.busy { // still unanswered after the drain: its connection is unusable
			l.hangUp(c)
		}
	}
	return s
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted)-1) * p)
	return sorted[i]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// wait is epoll_wait, raw when rawWait: a goroutine that waits in a system
// call the runtime knows of has its P taken away when it runs long, which
// sets the runtime's monitor thread waking every 20 µs again. The loop's
// goroutine is alone on its thread and the other goroutines (the webhook
// receiver's) have the other Ps; a signal (GC, preemption) ends the wait
// with EINTR. With one P, the wait gives it up.
func (l *eventLoop) wait(events []syscall.EpollEvent, msec int) (int, error) {
	if !l.rawWait {
		return syscall.EpollWait(l.epfd, events, msec)
	}
	r, _, errno := syscall.RawSyscall6(syscall.SYS_EPOLL_WAIT, uintptr(l.epfd),
		uintptr(unsafe.Pointer(&events[0])), uintptr(len(events)), uintptr(msec), 0, 0)
	if errno != 0 {
		return 0, errno
	}
	return int(r), nil
}
