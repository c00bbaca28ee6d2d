package config

import (
	"strings"
	"testing"
	"time"
)

func TestRetryScheduleAndPreviousDataKeys(t *testing.T) {
	t.Parallel()
	other := "MTExMTExMTExMTExMTExMTExMTExMTExMTExMTExMTE=" // 32 bytes
	base := func(kv ...string) Getenv {
		m := map[string]string{"DATABASE_URL": "postgres://x/y", "FLOWD_KEY_ENCRYPTION_KEY": key32,
			"FLOWD_SESSION_KEY": key32, "FLOWD_DATA_KEY": key32}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return env(m)
	}
	c, err := Load(base(), Need{Database: true, Secrets: true})
	if err != nil || c.WebhookRetrySchedule != nil || c.DataKeyPrevious != nil {
		t.Fatalf("defaults: %v %+v %v", err, c.WebhookRetrySchedule, c.DataKeyPrevious)
	}
	c, err = Load(base("FLOWD_WEBHOOK_RETRY_SCHEDULE", "300ms, 5s,1m,2d", "FLOWD_DATA_KEY_PREVIOUS", key32+","+other),
		Need{Database: true, Secrets: true})
	if err != nil {
		t.Fatal(err)
	}
	want := []time.Duration{300 * time.Millisecond, 5 * time.Second, time.Minute, 48 * time.Hour}
	if len(c.WebhookRetrySchedule) != len(want) {
		t.Fatalf("schedule %v", c.WebhookRetrySchedule)
	}
	for i := range want {
		if c.WebhookRetrySchedule[i] != want[i] {
			t.Fatalf("schedule %v, want %v", c.WebhookRetrySchedule, want)
		}
	}
	if len(c.DataKeyPrevious) != 2 || len(c.DataKeyPrevious[1]) != 32 || c.DataKeyPrevious[1][0] != '1' {
		t.Fatalf("previous keys %v", c.DataKeyPrevious)
	}
	for _, bad := range [][2]string{
		{"FLOWD_WEBHOOK_RETRY_SCHEDULE", "5s,soon"},
		{"FLOWD_WEBHOOK_RETRY_SCHEDULE", "-1s"},
		{"FLOWD_DATA_KEY_PREVIOUS", "c2hvcnQ="},
		{"FLOWD_DATA_KEY_PREVIOUS", key32 + ",!!!"},
	} {
		_, err := Load(base(bad[0], bad[1]), Need{Database: true, Secrets: true})
		if err == nil || !strings.Contains(err.Error(), bad[0]) {
			t.Errorf("%s=%q: %v; want an error naming it", bad[0], bad[1], err)
		}
	}
}
