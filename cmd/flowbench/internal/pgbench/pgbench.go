// Package pgbench runs pgbench, PostgreSQL's own load generator, in turns
// with flowd's load on the SQL flowd executes, and counts what it ran in
// its turns: the yardstick of flowbench's ratios.
package pgbench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"time"

	"github.com/flowd/flowd/cmd/flowbench/internal/procfs"
)

var (
	progressLine = regexp.MustCompile(`^progress: [0-9.]+ s, ([0-9.]+) tps`)
	txLine       = regexp.MustCompile(`number of transactions actually processed: ([0-9]+)`)
)

// Run is what pgbench measured in its turns.
type Run struct {
	Transactions float64
	Seconds      float64
	ClientCPU    time.Duration // pgbench's own
}

// TPS is transactions per second in pgbench's turns.
func (r Run) TPS() float64 {
	if r.Seconds <= 0 {
		return 0
	}
	return r.Transactions / r.Seconds
}

// Session is one pgbench process that takes turns with flowd. It
// connects and warms up once, then runs only between resume and pause
// (SIGCONT, SIGSTOP), so that every turn meets warm backends, as flowd's
// pooled connections are. Starting a backend and its first statements
// (loading the catalog, planning) cost far more on some machines than the
// statements themselves; a pgbench started afresh for each turn counted
// that, and made PostgreSQL's limit look a fraction of what it is.
//
// pgbench logs every transaction with the time it ended (-l); a turn counts
// those that ended within it.
type Session struct {
	cmd       *exec.Cmd
	logPrefix string
	stdout    bytes.Buffer
	stderr    *progressReader
	turns     []turn
	postgres  time.Duration // PostgreSQL's CPU in the turns
	client    time.Duration // pgbench's CPU in the turns
}

type turn struct{ from, to time.Time }

// warmUp bounds how long pgbench may take to connect and run its
// first full second of transactions.
const warmUp = time.Minute

// Start starts pgbench on files (pgbench scripts, each optionally
// "@weight") against dbURL with vars defined (-D) at the given concurrency,
// lets it connect and run for a second, and pauses it. Prepared
// statements, as pgx's statement cache makes them. dir holds its logs.
func Start(ctx context.Context, bin, dbURL, dir string, files []string, vars map[string]string, concurrency int) (*Session, error) {
	s := &Session{logPrefix: filepath.Join(dir, "pgbench_tx")}
	old, _ := filepath.Glob(s.logPrefix + ".*")
	for _, f := range old {
		_ = os.Remove(f)
	}
	// -T only bounds a run that flowbench fails to end: it ends pgbench
	// with SIGALRM, pgbench's own signal for the end of -T.
	args := []string{"-n", "-M", "prepared", "-c", strconv.Itoa(concurrency), "-j", strconv.Itoa(min(concurrency, 2)),
		"-T", "86400", "-P", "1", "-l", "--log-prefix", s.logPrefix}
	for _, f := range files {
		args = append(args, "-f", f)
	}
	for k, v := range vars {
		args = append(args, "-D", k+"="+v)
	}
	s.cmd = exec.CommandContext(ctx, bin, append(args, dbURL)...)
	s.cmd.Stdout = &s.stdout
	stderr, err := s.cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("pgbench: %w", err)
	}
	s.stderr = readProgress(stderr)
	select {
	case <-s.stderr.warm:
	case <-s.stderr.done:
		_ = s.cmd.Wait()
		return nil, fmt.Errorf("pgbench ended while warming up: %s%s", s.stdout.Bytes(), s.stderr.text())
	case <-time.After(warmUp):
		s.Kill()
		return nil, fmt.Errorf("pgbench did not run a full second within %s: %s", warmUp, s.stderr.text())
	}
	return s, s.signal(pauseSignal)
}

// Turn lets pgbench run for d, reading the CPU PostgreSQL and pgbench spend
// meanwhile through cpu.
func (s *Session) Turn(d time.Duration, cpu func() time.Duration) error {
	pg, client := cpu(), s.clientCPU()
	t := turn{from: time.Now()}
	if err := s.signal(resumeSignal); err != nil {
		return err
	}
	time.Sleep(d)
	if err := s.signal(pauseSignal); err != nil {
		return err
	}
	t.to = time.Now()
	s.turns = append(s.turns, t)
	s.postgres += cpu() - pg
	s.client += s.clientCPU() - client
	return nil
}

// Finish ends pgbench and counts the transactions that ended in its turns.
// It returns them and the CPU PostgreSQL spent in the turns.
func (s *Session) Finish() (Run, time.Duration, error) {
	if err := s.signal(endSignal); err != nil {
		return Run{}, 0, err
	}
	if err := s.signal(resumeSignal); err != nil {
		return Run{}, 0, err
	}
	<-s.stderr.done // before Wait, which closes the pipe
	if err := s.cmd.Wait(); err != nil {
		return Run{}, 0, fmt.Errorf("pgbench: %v: %s%s", err, s.stdout.Bytes(), s.stderr.text())
	}
	if txLine.Find(s.stdout.Bytes()) == nil {
		return Run{}, 0, fmt.Errorf("pgbench printed no transaction count: %s", s.stdout.Bytes())
	}
	n, err := s.countInTurns()
	if err != nil {
		return Run{}, 0, err
	}
	run := Run{Transactions: float64(n), ClientCPU: s.client}
	for _, t := range s.turns {
		run.Seconds += t.to.Sub(t.from).Seconds()
	}
	return run, s.postgres, nil
}

// Kill stops pgbench at once, for a run that failed.
func (s *Session) Kill() {
	if s.cmd.ProcessState == nil {
		_ = s.cmd.Process.Kill()
		<-s.stderr.done
		_ = s.cmd.Wait()
	}
}

func (s *Session) signal(sig os.Signal) error {
	if err := s.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("pgbench: %s: %w", sig, err)
	}
	return nil
}

func (s *Session) clientCPU() time.Duration {
	own, _ := procfs.CPU(strconv.Itoa(s.cmd.Process.Pid))
	return own
}

// countInTurns counts the logged transactions that ended within a turn. A
// log line is "client transaction latency script epoch_seconds microseconds".
func (s *Session) countInTurns() (int, error) {
	files, _ := filepath.Glob(s.logPrefix + ".*")
	if len(files) == 0 {
		return 0, errors.New("pgbench wrote no transaction log")
	}
	n := 0
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return 0, err
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := bytes.Fields(sc.Bytes())
			if len(fields) < 6 {
				continue
			}
			sec, err1 := strconv.ParseInt(string(fields[4]), 10, 64)
			usec, err2 := strconv.ParseInt(string(fields[5]), 10, 64)
			if err1 != nil || err2 != nil {
				continue
			}
			if s.inTurn(time.Unix(sec, usec*1000)) {
				n++
			}
		}
		err = sc.Err()
		f.Close()
		if err != nil {
			return 0, err
		}
	}
	return n, nil
}

func (s *Session) inTurn(t time.Time) bool {
	for _, tr := range s.turns {
		if !t.Before(tr.from) && !t.After(tr.to) {
			return true
		}
	}
	return false
}

// progressReader reads pgbench's progress lines (one a second) and keeps
// whatever else it writes for error messages. warm closes at the second
// line with transactions: the backends have connected and run a full
// second.
type progressReader struct {
	warm, done chan struct{}
	other      bytes.Buffer
}

func readProgress(r io.Reader) *progressReader {
	p := &progressReader{warm: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		busy := 0
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			m := progressLine.FindStringSubmatch(sc.Text())
			if m == nil {
				p.other.WriteString(sc.Text() + "\n")
				continue
			}
			if tps, _ := strconv.ParseFloat(m[1], 64); tps > 0 {
				if busy++; busy == 2 {
					close(p.warm)
				}
			}
		}
	}()
	return p
}

// text is what pgbench wrote besides progress; only once it has ended.
func (p *progressReader) text() string {
	select {
	case <-p.done:
		return p.other.String()
	default:
		return ""
	}
}

// Find looks for pgbench on PATH, then among PostgreSQL's installed versions.
func Find() (string, error) {
	if p, err := exec.LookPath("pgbench"); err == nil {
		return p, nil
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pgbench")
	if len(matches) > 0 {
		return matches[len(matches)-1], nil
	}
	return "", fmt.Errorf("pgbench not found: install postgresql-client or PostgreSQL")
}
