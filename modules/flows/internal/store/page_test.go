package store

import "testing"

// TestPageBytesHandsBackEachValueInScanOrder: texts and bytes come back as
// they were scanned, a NULL as empty, from a buffer that grew while
// scanning; and appending to one value's bytes leaves the next intact.
func TestPageBytesHandsBackEachValueInScanOrder(t *testing.T) {
	t.Parallel()
	p := newPageBytes(1, 1, 4) // far too small: the buffer grows
	col := p.column()
	scanned := [][]byte{[]byte("0192f6d0-7b8e-7c4a-9d2e-3f1a2b3c4d5e"), nil, []byte("Lån <&>"), {0x00, 0xff, 0x10}, {0x01, 0x02}}
	for _, v := range scanned {
		if err := col.ScanBytes(v); err != nil {
			t.Fatal(err)
		}
		if v != nil {
			v[0] ^= 0xff // pgx reuses the row's bytes after the scan
		}
	}
	v := p.values()
	if got := v.nextText(); got != "0192f6d0-7b8e-7c4a-9d2e-3f1a2b3c4d5e" {
		t.Errorf("first text = %q", got)
	}
	if got := v.nextText(); got != "" {
		t.Errorf("NULL = %q, want empty", got)
	}
	if got := v.nextText(); got != "Lån <&>" {
		t.Errorf("third text = %q", got)
	}
	b := v.nextBytes()
	if string(b) != "\x00\xff\x10" {
		t.Errorf("bytes = %x", b)
	}
	_ = append(b, 'x', 'x')
	if got := v.nextBytes(); string(got) != "\x01\x02" {
		t.Errorf("the bytes after = %x, want 0102 intact after an append to the ones before", got)
	}
}
