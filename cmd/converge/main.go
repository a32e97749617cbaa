package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// errUsage marks errors in how the command was called: they are followed by
// a hint to run --help.
var errUsage = errors.New("usage")

// usageError is an error in the command line.
type usageError struct{ msg string }

func (e usageError) Error() string        { return e.msg }
func (e usageError) Is(target error) bool { return target == errUsage }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// command is one converge command.
type command struct {
	// path is how it is called, e.g. "create api".
	path string
	// summary is one line for the command list.
	summary string
	// usage is the synopsis and description shown by --help.
	usage string
	// positional is set for commands that take arguments besides flags,
	// which may come before, between or after the flags.
	positional bool
	// flags defines the command's flags on fs and returns the action,
	// which runs after the flags were parsed.
	flags func(fs *flag.FlagSet) func(ctx context.Context, ui *ui) error
}

var commands = []command{initCommand, createAPICommand, createControllerCommand, createWebhookCommand, explainCommand, versionCommand}

const topUsage = `converge scaffolds Kubernetes controller projects built on the converge framework.

Usage:
  converge <command> [flags]

Commands:
%s
A project in two commands:
  converge init --module example.com/team/op --dir op && cd op
  converge create api --group shop --version v1alpha1 --kind Order
  make test

Then, to add webhooks to the kind:
  converge create webhook --group shop --version v1alpha1 --kind Order --defaulting --validation

Run "converge <command> --help" for a command's flags.
`

// run runs the converge command line args and returns the exit status:
// 0 on success, 1 when the command failed, 2 for a bad command line.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" || args[0] == "-help" {
		if len(args) > 1 && args[0] == "help" {
			return run(ctx, append(args[1:], "--help"), stdout, stderr)
		}
		printTop(stdout)
		return 0
	}
	cmd, rest, ok := findCommand(args)
	if !ok {
		if sub := subcommands(args[0]); len(sub) > 0 && (len(args) == 1 || strings.HasPrefix(args[1], "-")) {
			// A group alone (converge create, converge create --help): its commands.
			printGroup(stdout, args[0], sub)
			return 0
		}
		given := strings.Join(args[:min(len(args), 2)], " ")
		if len(args) == 1 || subcommands(args[0]) == nil {
			given = args[0]
		}
		fmt.Fprintf(stderr, "converge: unknown command %q\n", given)
		if s := suggestCommand(args); s != "" {
			fmt.Fprintf(stderr, "Did you mean \"converge %s\"?\n", s)
		}
		fmt.Fprintln(stderr)
		printTop(stderr)
		return 2
	}
	fs := flag.NewFlagSet("converge "+cmd.path, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	action := cmd.flags(fs)
	var positional []string
	for {
		if err := fs.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				printUsage(stdout, cmd, fs)
				return 0
			}
			fmt.Fprintf(stderr, "converge %s: %s\n%sRun \"converge %s --help\" for its flags.\n", cmd.path, twoDashes(err.Error()), flagHint(cmd, fs, err), cmd.path)
			return 2
		}
		if !cmd.positional || fs.NArg() == 0 {
			break
		}
		positional, rest = append(positional, fs.Arg(0)), fs.Args()[1:]
	}
	if cmd.positional {
		_ = fs.Parse(append([]string{"--"}, positional...)) // fs.Args() is now the arguments
	}
	if fs.NArg() > 0 && !cmd.positional {
		fmt.Fprintf(stderr, "converge %s: unexpected argument %q (every value is given with a flag)\nRun \"converge %s --help\" for its flags.\n", cmd.path, fs.Arg(0), cmd.path)
		return 2
	}
	u := &ui{out: stdout}
	if err := action(ctx, u); err != nil {
		if e, ok := errors.AsType[exitError](err); ok {
			if e.msg != "" {
				fmt.Fprintf(stderr, "converge %s: %s\n", cmd.path, e.msg)
			}
			return e.code
		}
		fmt.Fprintf(stderr, "converge %s: %v\n", cmd.path, err)
		if errors.Is(err, errUsage) {
			fmt.Fprintf(stderr, "Run \"converge %s --help\" for its flags.\n", cmd.path)
			return 2
		}
		return 1
	}
	return 0
}

// findCommand matches the longest command path at the start of args.
func findCommand(args []string) (command, []string, bool) {
	for _, c := range commands {
		words := strings.Fields(c.path)
		if len(args) >= len(words) && strings.Join(args[:len(words)], " ") == c.path {
			return c, args[len(words):], true
		}
	}
	return command{}, nil, false
}

func printTop(w io.Writer) {
	var b strings.Builder
	for _, c := range commands {
		fmt.Fprintf(&b, "  %-18s %s\n", c.path, c.summary)
	}
	fmt.Fprintf(w, topUsage, b.String())
}

func printUsage(w io.Writer, c command, fs *flag.FlagSet) {
	fmt.Fprintf(w, "%s\n\nFlags:\n", strings.TrimRight(c.usage, "\n"))
	fs.VisitAll(func(f *flag.Flag) {
		name, usage := flag.UnquoteUsage(f)
		if name != "" {
			name = " " + name
		}
		dashes := "--"
		if len(f.Name) == 1 {
			dashes = "-" // -o, as one-letter flags are spelled
		}
		fmt.Fprintf(w, "  %s%s%s\n    \t%s", dashes, f.Name, name, strings.ReplaceAll(usage, "\n", "\n    \t"))
		if f.DefValue != "" && f.DefValue != "false" {
			fmt.Fprintf(w, " (default %s)", f.DefValue)
		}
		fmt.Fprintln(w)
	})
	fmt.Fprintln(w, "  --help\n    \tshow this help")
}

// ui prints progress.
type ui struct {
	out io.Writer
}

func (u *ui) printf(format string, args ...any) { fmt.Fprintf(u.out, format, args...) }
