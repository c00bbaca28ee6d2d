package store

import (
	"strconv"
	"testing"
	"unsafe"
)

func TestSymbolTableKeepsOneStringPerValue(t *testing.T) {
	t.Parallel()
	table := &symbolTable{max: 3}
	first := table.get([]byte("Accepted"))
	b := []byte("Accepted")
	again := table.get(b)
	b[0] = 'X' // the caller's bytes change after the read, as pgx's buffer does
	if first != "Accepted" || again != "Accepted" {
		t.Fatalf("got %q and %q", first, again)
	}
	if unsafe.StringData(first) != unsafe.StringData(again) {
		t.Fatal("a value seen before got a string of its own")
	}
	for i := range 5 {
		v := "v" + strconv.Itoa(i)
		if got := table.get([]byte(v)); got != v {
			t.Fatalf("get(%q) = %q", v, got)
		}
	}
	if n := len(*table.values.Load()); n != 3 {
		t.Fatalf("the table kept %d values, want its bound of 3", n)
	}
	if got := table.get([]byte("v4")); got != "v4" {
		t.Fatalf("a value beyond the bound: %q", got)
	}
}

func TestSymbolScansIntoItsString(t *testing.T) {
	t.Parallel()
	var status string
	if err := (symbol{&status}).ScanBytes([]byte("Opened")); err != nil || status != "Opened" {
		t.Fatalf("ScanBytes gave %q, %v", status, err)
	}
}
