package benchsql

import (
	"slices"
	"strings"
	"testing"
)

func TestRenderWritesEachParameterOnce(t *testing.T) {
	t.Parallel()
	args := []string{":a", "2", "3", "4", "5", "6", "7", "8", "9", ":j"}
	if got := Render("f($1, $10, $11)", args...); got != "f(:a, :j, $11)" {
		t.Errorf("Render = %q", got)
	}
}

func TestSpansSkipCommentsAndMetaCommands(t *testing.T) {
	t.Parallel()
	lines := strings.Split("-- a comment\n\\set n random(1, 9)\nbegin;\n\\startpipeline\nselect 1,\n\t2 from t;\n\\endpipeline\n"+
		"insert into u values (1)\nreturning * \\gset u_\ncommit;\n", "\n")
	var got []string
	for _, s := range spans(lines) {
		got = append(got, collapse(strings.Join(lines[s.from:s.to], " ")))
	}
	if want := []string{"begin;", "select 1, 2 from t;", `insert into u values (1) returning * \gset u_`, "commit;"}; !slices.Equal(got, want) {
		t.Errorf("statements %q, want %q", got, want)
	}
}

func TestWrapKeepsTheStatement(t *testing.T) {
	t.Parallel()
	s := "select a, (select b from c where d = 'x from y') from t where e = $1 order by f limit 1"
	lines := wrap(s)
	if collapse(strings.Join(lines, " ")) != s || len(lines) != 4 || !strings.HasPrefix(lines[1], "\tfrom t") {
		t.Errorf("wrapped as %q", lines)
	}
}

func TestRunTakesTheBranchesAndNumbersTheVariables(t *testing.T) {
	t.Parallel()
	for _, generic := range []string{"0", "1"} {
		got := Run(t, "list_first.sql", map[string]string{"generic": generic, "org": "o"})
		want := 1
		if generic == "1" {
			want = 2
		}
		if len(got) != want {
			t.Fatalf("generic %s: %d statements, want %d", generic, len(got), want)
		}
		last := got[len(got)-1]
		if strings.Contains(last.SQL, ":org") || !strings.Contains(last.SQL, "$1") || !slices.Equal(last.Args, []string{"o", "o"}) {
			t.Errorf("generic %s: the page as prepared: %q %q", generic, last.SQL, last.Args)
		}
	}
}
