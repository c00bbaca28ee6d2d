//go:build !linux

package loadgen

import (
	"context"
	"errors"
	"time"
)

// ErrNeedsLinux is New's answer off Linux. The load generator is an
// epoll loop, as pgbench's client is, so that it costs the shared cores as
// little as the yardstick's does; a portable client would cost more and
// skew the ratio. flowbench also reads CPU times from /proc.
var ErrNeedsLinux = errors.New("flowbench's load generator needs Linux (it is an epoll event loop); run make bench on Linux")

// load stands in for the Linux load generator so that the rest of
// flowbench builds everywhere.
type Load struct{}

func New(string, int) (*Load, error) { return nil, ErrNeedsLinux }

func (*Load) Close() {}

func (*Load) Drive(context.Context, time.Duration, Next) Sample { return Sample{} }
