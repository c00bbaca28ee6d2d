package store

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// scanSummaries reads a page of rows of summaryColumns. Under pgx's
// statement cache every non-text column comes in binary, and the rows are
// decoded from their raw values: Scan's per-column plans, type checks and
// interface calls were a twentieth of flowd's CPU for a list page. Rows in
// other formats go through Scan: a DATABASE_URL with
// default_query_exec_mode=simple_protocol (for a pooler) sends them in text.
func scanSummaries(rows pgx.Rows, organizationID string, limit int) ([]FlowSummary, error) {
	defer rows.Close()
	out := make([]FlowSummary, 0, limit)
	// The row's texts and sealed national id go to the page's buffer.
	page := newPageBytes(limit, 4, 160)
	f := FlowSummary{OrganizationID: organizationID}
	if binarySummaries(rows.FieldDescriptions()) {
		for rows.Next() {
			if err := decodeSummary(rows.RawValues(), &f, page); err != nil {
				return nil, err
			}
			out = append(out, f)
		}
	} else {
		// One row and one list of destinations serve every row: passing
		// fresh pointers to Scan would move each row to the heap.
		col := page.column()
		dest := []any{col, &f.Number, col, col, symbol{&f.ConsentStatus},
			symbol{&f.ProcessStatus}, &f.Sandbox, symbol{&f.PIIKeyID}, col, &f.CreatedAt, &f.UpdatedAt}
		for rows.Next() {
			if err := rows.Scan(dest...); err != nil {
				return nil, err
			}
			out = append(out, f)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	v := page.values()
	for i := range out {
		out[i].ID, out[i].ReferenceID, out[i].ReferenceName = v.nextText(), v.nextText(), v.nextText()
		out[i].NationalIDSealed = v.nextBytes()
	}
	return out, nil
}

// summaryBinaryColumns are the columns of summaryColumns that decodeSummary
// reads in binary: flow_number, sandbox, national_id_sealed and the two
// instants. The others are text, whose bytes are the same in either format.
var summaryBinaryColumns = []int{1, 6, 8, 9, 10}

func binarySummaries(fields []pgconn.FieldDescription) bool {
	if len(fields) != 11 {
		return false
	}
	for _, i := range summaryBinaryColumns {
		if fields[i].Format != pgx.BinaryFormatCode {
			return false
		}
	}
	return true
}

// decodeSummary decodes one row of summaryColumns into f, its texts and
// sealed national id into page, as Scan would (NULL texts read as empty).
func decodeSummary(v [][]byte, f *FlowSummary, page *pageBytes) error {
	col := page.column()
	_ = col.ScanBytes(v[0])
	n, err := binaryInt8(v[1])
	if err != nil {
		return fmt.Errorf("flow_number: %w", err)
	}
	f.Number = n
	_ = col.ScanBytes(v[2])
	_ = col.ScanBytes(v[3])
	f.ConsentStatus, f.ProcessStatus = symbols.get(v[4]), symbols.get(v[5])
	if len(v[6]) != 1 {
		return fmt.Errorf("sandbox: %d bytes, want 1", len(v[6]))
	}
	f.Sandbox = v[6][0] == 1
	f.PIIKeyID = symbols.get(v[7])
	_ = col.ScanBytes(v[8])
	if f.CreatedAt, err = binaryTimestamptz(v[9]); err != nil {
		return fmt.Errorf("created_at: %w", err)
	}
	if f.UpdatedAt, err = binaryTimestamptz(v[10]); err != nil {
		return fmt.Errorf("updated_at: %w", err)
	}
	return nil
}

func binaryInt8(b []byte) (int64, error) {
	if len(b) != 8 {
		return 0, fmt.Errorf("%d bytes, want 8", len(b))
	}
	return int64(binary.BigEndian.Uint64(b)), nil
}

// binaryTimestamptz decodes PostgreSQL's binary timestamptz, microseconds
// since 2000-01-01 UTC, into the time.Time pgx makes of it.
func binaryTimestamptz(b []byte) (time.Time, error) {
	us, err := binaryInt8(b)
	if err != nil {
		return time.Time{}, err
	}
	if us == infinityMicroseconds || us == -infinityMicroseconds-1 {
		return time.Time{}, fmt.Errorf("an infinite instant")
	}
	const y2k = 946_684_800 // 2000-01-01 in Unix seconds
	return time.Unix(y2k+us/1_000_000, us%1_000_000*1_000), nil
}

// infinityMicroseconds is how PostgreSQL sends 'infinity' (and
// -infinityMicroseconds-1, '-infinity').
const infinityMicroseconds = 1<<63 - 1
