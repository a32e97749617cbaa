package main

import (
	"flag"
	"fmt"
	"io"
	"regexp"
	"strings"
)

// subcommands returns the commands under group (e.g. "create"), or nil.
func subcommands(group string) []command {
	var out []command
	for _, c := range commands {
		if first, _, ok := strings.Cut(c.path, " "); ok && first == group {
			out = append(out, c)
		}
	}
	return out
}

func printGroup(w io.Writer, group string, sub []command) {
	fmt.Fprintf(w, "Usage: converge %s <command> [flags]\n\nCommands:\n", group)
	for _, c := range sub {
		fmt.Fprintf(w, "  %-18s %s\n", c.path, c.summary)
	}
	fmt.Fprintf(w, "\nRun \"converge %s <command> --help\" for a command's flags.\n", group)
}

// suggestCommand returns the command closest to the mistyped one (args
// start with it), or "".
func suggestCommand(args []string) string {
	if len(args) > 1 {
		// converge creat api: the group mistyped, the command right.
		if g := suggestCommand(args[:1]); g != "" {
			for _, c := range subcommands(g) {
				if c.path == g+" "+args[1] {
					return c.path
				}
			}
		}
	}
	given := strings.Join(args[:min(len(args), 2)], " ")
	if len(args) == 1 || subcommands(args[0]) == nil {
		given = args[0]
	}
	var paths []string
	for _, c := range commands {
		paths = append(paths, c.path)
		if first, _, ok := strings.Cut(c.path, " "); ok {
			paths = append(paths, first)
		}
	}
	return closest(given, paths)
}

// kubebuilderFlags are flags of kubebuilder's commands that converge names
// or handles differently, with what to do instead.
var kubebuilderFlags = map[string]string{
	"programmatic-validation": "--validation (converge create webhook --validation): kubebuilder's --programmatic-validation",
	"repo":                    "--module: kubebuilder's init --repo is converge init --module",
	"resource":                "nothing: converge create api always writes the types and the controller",
	"controller":              "nothing: converge create api always writes the types and the controller; converge create controller is for built-in kinds",
	"make":                    "--skip-generate (kubebuilder's --make=false)",
	"plugins":                 "nothing: converge has one project layout",
	"project-version":         "nothing: .converge/scaffold.json records the format",
	"owner":                   "nothing: the header of every Go file (hack/boilerplate.go.txt) names \"The NAME Authors\"; edit it there and in the files",
	"license":                 "nothing: converge writes an Apache-2.0 header (hack/boilerplate.go.txt); edit it there and in the files",
}

// flagError matches the flag package's errors that name a flag.
var flagError = regexp.MustCompile(`(provided but not defined|needs an argument|invalid value "[^"]*" for flag|invalid boolean value "[^"]*" for|invalid boolean flag)[: ]+-([^ :]+)`)

// twoDashes shows the flag in one of the flag package's errors as converge
// documents flags: with two dashes.
func twoDashes(msg string) string {
	return flagError.ReplaceAllString(msg, "$1: --$2")
}

// flagHint suggests the flag meant by an unknown one: kubebuilder's name
// for it, else the closest flag of the command. It returns "" or a line.
func flagHint(cmd command, fs *flag.FlagSet, err error) string {
	m := flagError.FindStringSubmatch(err.Error())
	if m == nil || !strings.HasPrefix(m[1], "provided but not defined") {
		return ""
	}
	name, _, _ := strings.Cut(strings.TrimLeft(m[2], "-"), "=")
	if fs.Lookup(name) == nil {
		if h, ok := kubebuilderFlags[name]; ok {
			return fmt.Sprintf("converge %s has no --%s; use %s.\n", cmd.path, name, h)
		}
	}
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	if s := closest(name, names); s != "" {
		return fmt.Sprintf("Did you mean --%s?\n", s)
	}
	return ""
}

// closest returns the candidate nearest to s by edit distance, if it is
// near enough to be a typo (at most 2 edits, fewer for short words), or "".
func closest(s string, candidates []string) string {
	best, bestD := "", 0
	for _, c := range candidates {
		d := distance(s, c)
		if best == "" || d < bestD {
			best, bestD = c, d
		}
	}
	if best == "" || bestD > min(2, max(1, len(s)/3)) {
		return ""
	}
	return best
}

// distance is the Levenshtein distance between a and b.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
