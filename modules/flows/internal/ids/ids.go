// Package ids makes and checks the ids of the flows module's rows: flows,
// tasks, incidents and uses.
package ids

// uuid makes flow, task and incident ids; v7 ids are time-ordered, which
// keeps the primary key index dense. It was already in the module graph.
import "github.com/google/uuid"

// Valid reports whether id is a flow, task or incident id in canonical form;
// anything else cannot name a flow and is simply not found.
func Valid(id string) bool {
	if len(id) != 36 {
		return false
	}
	_, err := uuid.Parse(id)
	return err == nil
}

// New returns a new time-ordered id.
func New() string { return uuid.Must(uuid.NewV7()).String() }
