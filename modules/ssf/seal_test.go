package ssf_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/flowd/flowd/modules/ssf"
)

func TestAuthorizationHeaderIsSealedAndResealed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := newReceiver(t, b.keys)
	s := b.pushStream(t, r.url())

	var sealed []byte
	var keyID string
	if err := b.pool.QueryRow(context.Background(), `select authorization_sealed, authorization_key_id from ssf_streams`).Scan(&sealed, &keyID); err != nil {
		t.Fatal(err)
	}
	if keyID == "" || bytes.Contains(sealed, []byte("receiver-secret")) {
		t.Fatalf("the Authorization header is stored as %q under key %q, want it sealed", sealed, keyID)
	}
	if got := b.stream(t, s.ID).Delivery.AuthorizationHeader; got != "" {
		t.Errorf("a stream read back shows its Authorization header %q", got)
	}

	// A new data key: the rotation seals the header again, once, and a
	// module that holds only the new key pushes with it (the receiver
	// checks the header).
	rotated, err := ssf.New(b.pool, b.signer, everyHolder{}, testSealer(t, rotatedKey, dataKey), b.opts)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []int{1, 0} {
		if n, err := rotated.ResealBatch(context.Background(), 10); err != nil || n != want {
			t.Fatalf("reseal %d: %d, %v; want %d", i+1, n, err, want)
		}
	}
	onlyNew, err := ssf.New(b.pool, b.signer, everyHolder{}, testSealer(t, rotatedKey), b.opts)
	if err != nil {
		t.Fatal(err)
	}
	start(t, onlyNew)
	b.revoke(t, "consent-1", 1)
	if got := r.awaitCount(t, 1); got[0].status != 202 {
		t.Errorf("the push after the rotation was answered %d", got[0].status)
	}
}
