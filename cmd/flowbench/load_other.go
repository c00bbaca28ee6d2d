//go:build !linux

package main

import (
	"context"
	"errors"
	"time"
)

// errNeedsLinux is newLoad's answer off Linux. The load generator is an
// epoll loop, as pgbench's client is, so that it costs the shared cores as
// little as the yardstick's does; a portable client would cost more and
// skew the ratio. flowbench also reads CPU times from /proc.
var errNeedsLinux = errors.New("flowbench's load generator needs Linux (it is an epoll event loop); run make bench on Linux")

// load stands in for the Linux load generator so that the rest of
// flowbench builds everywhere.
type load struct{}

func newLoad(string, int) (*load, error) { return nil, errNeedsLinux }

func (*load) close() {}

func (*load) drive(context.Context, time.Duration, nextRequest) sample { return sample{} }
