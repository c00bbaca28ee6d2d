package loadgen

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"syscall"
	"time"
	"unsafe"
)

// Load is the load generator: its workers' connections, driven by one
// event loop. A loop per core cost more CPU per request, each loop waking
// for fewer answers.
type Load struct {
	loop  *eventLoop
	conns []*loadConn
}

func New(base string, concurrency int) (*Load, error) {
	loop, err := newEventLoop(base)
	if err != nil {
		return nil, err
	}
	l := &Load{loop: loop}
	for w := range max(1, concurrency) {
		l.conns = append(l.conns, &loadConn{worker: w, fd: -1})
	}
	return l, nil
}

func (l *Load) Close() { l.loop.close() }

// Drive sends every worker's requests, one at a time each, for d (or until
// every worker is done), and measures each.
func (l *Load) Drive(ctx context.Context, d time.Duration, next Next) Sample {
	runtime.LockOSThread() // the loop blocks its thread in epoll_wait
	defer runtime.UnlockOSThread()
	start := time.Now()
	deadline := start.Add(d)
	s := l.loop.run(ctx, l.conns, deadline, next)
	s.Elapsed = min(time.Since(start), d)
	return s
}

// drainTimeout bounds the wait for the answers still out at a run's end.
const drainTimeout = 30 * time.Second

// run drives conns until deadline: each sends its worker's next request as
// soon as the last is answered. Answers that come after the deadline are
// read, so that the connection is ready for the next run, but not counted:
// a request cut short by the end of the run does not count.
func (l *eventLoop) run(ctx context.Context, conns []*loadConn, deadline time.Time, next Next) Sample {
	var s Sample
	fail := s.Fail
	var idle []*loadConn // workers whose last request failed: they try again after the next wait
	finished := 0        // workers with no more requests
	start := func(c *loadConn) {
		req, err := next(c.worker, c.calls)
		if errors.Is(err, ErrWorkerDone) {
			finished++
			return
		}
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
		if ctx.Err() != nil || now.After(drainUntil) || ((!now.Before(deadline) || finished == len(conns)) && busy == 0) {
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
				s.Latencies = append(s.Latencies, end.Sub(c.start))
				if status != c.req.Want {
					fail(fmt.Errorf("%s %s: %d %s", c.req.Method, c.req.Path, status, truncate(body, 200)))
				} else if c.req.Done != nil {
					if err := c.req.Done(body); err != nil {
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
