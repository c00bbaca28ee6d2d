package store

// A batch of the admin commands (rekey, reindex) writes its rows with one
// statement per organization, which takes the batch's values as arrays and
// joins them to the table: Citus routes a statement that names one
// organization to that organization's node, and plans it as PostgreSQL
// does, while a statement per row costs a round trip through the
// coordinator each.

// byOrganization splits items into one run per organization, each in the
// order of items, the runs in the order their organizations first appear.
func byOrganization[T any](items []T, organization func(T) string) [][]T {
	at := map[string]int{}
	var runs [][]T
	for _, it := range items {
		o := organization(it)
		i, ok := at[o]
		if !ok {
			i = len(runs)
			at[o] = i
			runs = append(runs, nil)
		}
		runs[i] = append(runs[i], it)
	}
	return runs
}

// arrayOf is one field of each of items, as an array argument.
func arrayOf[T, V any](items []T, field func(T) V) []V {
	out := make([]V, len(items))
	for i, it := range items {
		out[i] = field(it)
	}
	return out
}
