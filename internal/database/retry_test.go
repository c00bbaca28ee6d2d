package database

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"
)

func TestRetryWhileUnavailable(t *testing.T) {
	t.Parallel()
	unreachable := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	discard := slog.New(slog.NewTextHandler(io.Discard, nil))
	tests := []struct {
		name     string
		failures []error // what the tries return, one by one, then nil
		want     error
		tries    int
	}{
		{"succeeds at once", nil, nil, 1},
		{"unreachable twice, then up", []error{unreachable, unreachable}, nil, 3},
		{"another failure ends it", []error{unreachable, errSomethingElse}, errSomethingElse, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tries := 0
			err := RetryWhileUnavailable(context.Background(), discard, "test", time.Millisecond, func(context.Context) error {
				tries++
				if tries <= len(tt.failures) {
					return tt.failures[tries-1]
				}
				return nil
			})
			if !errors.Is(err, tt.want) || tries != tt.tries {
				t.Fatalf("returned %v after %d tries, want %v after %d", err, tries, tt.want, tt.tries)
			}
		})
	}
	t.Run("stops when told to", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		tries := 0
		err := RetryWhileUnavailable(ctx, discard, "test", time.Millisecond, func(context.Context) error {
			if tries++; tries == 3 {
				cancel()
			}
			return unreachable
		})
		if !errors.Is(err, unreachable) || tries != 3 {
			t.Fatalf("returned %v after %d tries, want the last failure after 3", err, tries)
		}
	})
}

var errSomethingElse = errors.New("a bad query")
