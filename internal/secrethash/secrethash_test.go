package secrethash

import (
	"strings"
	"testing"
)

func TestHashVerify(t *testing.T) {
	t.Parallel()
	h, err := Hash("correct horse battery staple", Cheap)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(h, "$argon2id$v=19$m=64,t=1,p=1$") {
		t.Fatalf("not a PHC argon2id string: %s", h)
	}
	h2, _ := Hash("correct horse battery staple", Cheap)
	if h == h2 {
		t.Fatal("two hashes of one secret are equal: the salt is not random")
	}
	tests := []struct {
		name   string
		secret string
		hash   string
		ok     bool
		err    error
	}{
		{"right", "correct horse battery staple", h, true, nil},
		{"wrong", "correct horse battery stapl", h, false, nil},
		{"empty", "", h, false, nil},
		{"not argon2id", "x", "$2a$10$abcdefghijklmnopqrstuv", false, ErrMalformed},
		{"bad params", "x", "$argon2id$v=19$m=x,t=1,p=1$c2FsdHNhbHQ$aGFzaGhhc2hoYXNoaGFzaA", false, ErrMalformed},
		{"wrong version", "x", strings.Replace(h, "v=19", "v=16", 1), false, ErrMalformed},
		{"garbage", "x", "garbage", false, ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ok, err := Verify(tt.secret, tt.hash)
			if ok != tt.ok || err != tt.err {
				t.Fatalf("Verify = %v, %v; want %v, %v", ok, err, tt.ok, tt.err)
			}
		})
	}
}

func TestNeedsRehash(t *testing.T) {
	t.Parallel()
	h, _ := Hash("s", Cheap)
	if !NeedsRehash(h, Default) {
		t.Fatal("a cheap hash does not need a rehash under the default parameters")
	}
	if NeedsRehash(h, Cheap) {
		t.Fatal("a hash needs a rehash under its own parameters")
	}
}

func TestHashRefusesUnusableParams(t *testing.T) {
	t.Parallel()
	if _, err := Hash("s", Params{}); err == nil {
		t.Fatal("zero parameters accepted")
	}
}

func TestParseParams(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want Params
		ok   bool
	}{
		{"m=65536,t=3,p=2", Default, true},
		{"m=19456,t=2,p=1", Params{Memory: 19456, Iterations: 2, Parallelism: 1, SaltLength: 16, KeyLength: 32}, true},
		{"m=47104,t=1,p=1", Params{Memory: 47104, Iterations: 1, Parallelism: 1, SaltLength: 16, KeyLength: 32}, true},
		{"m=19456,t=1,p=1", Params{}, false}, // below OWASP's least
		{"m=64,t=1,p=1", Params{}, false},
		{"m=4096,t=100,p=1", Params{}, false}, // too little memory, however many passes
		{"m=65536,t=3", Params{}, false},
		{"m=65536,t=3,p=2 extra", Params{}, false},
		{"m=65536,t=3,p=0", Params{}, false},
		{"", Params{}, false},
	}
	for _, tt := range tests {
		got, err := ParseParams(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseParams(%q) = %+v, %v; want %+v, ok %v", tt.in, got, err, tt.want, tt.ok)
		}
		if tt.ok && got.String() != tt.in {
			t.Errorf("%+v.String() = %q, want %q", got, got.String(), tt.in)
		}
	}
}
