package login

import (
	"strings"
	"testing"

	"github.com/go-jose/go-jose/v4"
)

func TestNewRefusesAClientWithAnIDTokenAlgorithmNotSigned(t *testing.T) {
	t.Parallel()
	key := make([]byte, 32)
	tests := []struct {
		alg jose.SignatureAlgorithm
		ok  bool
	}{{"", true}, {jose.RS256, true}, {jose.ES256, true}, {jose.HS256, false}, {"none", false}, {jose.PS256, false}}
	for _, tt := range tests {
		_, err := New(nil, nil, nil, Config{DataKey: key, Clients: []Client{{ID: "rp", IDTokenSignedResponseAlg: tt.alg}}})
		if (err == nil) != tt.ok || (err != nil && !strings.Contains(err.Error(), "rp")) {
			t.Errorf("client with %q: %v", tt.alg, err)
		}
	}
}
