package store

// pageBytes gathers the text and bytea columns of a page's rows in one
// buffer, made into strings once the page is read: a string or slice of its
// own for each such column of each row was a quarter of a list page's heap
// allocations.
type pageBytes struct {
	buf  []byte
	ends []int // where each value scanned ends in buf, in scan order
}

// newPageBytes sizes the buffer for rows rows of about rowBytes each.
func newPageBytes(rows, columns, rowBytes int) *pageBytes {
	return &pageBytes{buf: make([]byte, 0, rows*rowBytes), ends: make([]int, 0, rows*columns)}
}

// column is a pgtype.BytesScanner that adds a column's value to p. pgx
// hands it the row's own bytes, which it copies. NULL adds an empty value.
func (p *pageBytes) column() pageColumn { return pageColumn{p} }

type pageColumn struct{ p *pageBytes }

func (c pageColumn) ScanBytes(src []byte) error {
	c.p.buf = append(c.p.buf, src...)
	c.p.ends = append(c.p.ends, len(c.p.buf))
	return nil
}

// values returns the values scanned, in scan order. p must not scan more.
func (p *pageBytes) values() *pageValues {
	return &pageValues{text: string(p.buf), bytes: p.buf, ends: p.ends}
}

// pageValues hands out a page's values, in the order they were scanned,
// as slices of one string or of the page's buffer.
type pageValues struct {
	text  string
	bytes []byte
	ends  []int
	start int
}

func (v *pageValues) next() (start, end int) {
	start, end = v.start, v.ends[0]
	v.start, v.ends = end, v.ends[1:]
	return start, end
}

// nextText returns the next value as a string.
func (v *pageValues) nextText() string {
	start, end := v.next()
	return v.text[start:end]
}

// nextBytes returns the next value as bytes, which appending to cannot
// overwrite the value after it.
func (v *pageValues) nextBytes() []byte {
	start, end := v.next()
	return v.bytes[start:end:end]
}
