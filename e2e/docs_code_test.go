package e2e_test

// What the README and docs/ say of the code, checked against the code: every make target they
// name is in the Makefile; every HUBU_, GONGBU_, MOCKFLUX_ or ROUTER_ variable is read somewhere;
// every --flag they give a binary is in that binary's --help, with the default they state; every
// usage block is the binary's own; the table of *_FILE secrets lists each binary's secrets. The
// binaries are the ones TestMain built for this package (failpoints change no flag), asked with
// an empty environment, so what --help prints is the built-in defaults.

import (
	"context"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestDocsAgreeWithTheCode(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..")
	docs := readDocs(t, root)
	h := &helps{bin: string(bin), out: map[string]string{}}

	t.Run("make targets", func(t *testing.T) {
		targets := makeTargets(t, root)
		n := 0
		defer func() { t.Logf("%d make commands", n) }()
		for _, d := range docs {
			for _, f := range d.code() {
				for _, m := range makeCommand.FindAllStringSubmatch(f.text, -1) {
					n++
					if !targets[m[1]] {
						t.Errorf("%s:%d: `make %s`: the Makefile has no target %s", d.name, f.line, m[1], m[1])
					}
				}
			}
		}
	})

	t.Run("environment variables", func(t *testing.T) {
		corpus := programText(t, root)
		var all strings.Builder
		for _, c := range h.commands(t) {
			all.WriteString(h.of(t, c))
		}
		for _, d := range docs {
			for i, l := range d.lines {
				for _, m := range envName.FindAllStringSubmatchIndex(l, -1) {
					name := l[m[0]:m[1]]
					if strings.HasPrefix(l[m[1]:], "_*") || strings.HasPrefix(l[m[1]:], "_{") || strings.HasPrefix(l[m[1]:], "*") {
						continue // a pattern such as HUBU_STACK_*_ADDR
					}
					if problem := corpus.reads(name, all.String()); problem != "" {
						t.Errorf("%s:%d: %s %s", d.name, i+1, name, problem)
					}
				}
			}
		}
		for name := range testSettings {
			if !corpus.testCode[name] {
				t.Errorf("%s is listed as a setting only tests read, but no test reads it: take it off testSettings", name)
			}
		}
		// The other way: every variable a binary reads (its --help names them all) is in the
		// operations guide, where every setting of every binary is. The NAME_FILE forms are in
		// its table of secrets, which "secrets from files" checks.
		ops := strings.Join(docOf(t, docs, "docs/operations.md").lines, "\n")
		readBy := map[string][]string{}
		for _, c := range h.commands(t) {
			for _, name := range envName.FindAllString(h.of(t, c), -1) {
				if !strings.HasSuffix(name, "_FILE") && !slices.Contains(readBy[name], c) {
					readBy[name] = append(readBy[name], c)
				}
			}
		}
		for _, name := range slices.Sorted(maps.Keys(readBy)) {
			if !regexp.MustCompile(`\b` + name + `\b`).MatchString(ops) {
				t.Errorf("docs/operations.md does not name %s, which %s read (--help)", name, strings.Join(readBy[name], ", "))
			}
		}
	})

	t.Run("flags and defaults", func(t *testing.T) {
		flags, stated := 0, 0
		defer func() { t.Logf("%d flags given to a binary, %d defaults stated", flags, stated) }()
		byEnv := h.defaultsByEnv(t)
		for _, d := range docs {
			for _, u := range d.uses() {
				help := h.forCommand(t, u.cmd)
				for _, f := range u.flags {
					flags++
					if f.name == "help" || f.name == "version" || hasFlag(help, f.name) {
						continue
					}
					if u.cmd.binary == "hubuctl" && hasFlag(h.of(t, "hubuctl"), f.name) {
						continue // a global flag, accepted anywhere
					}
					t.Errorf("%s:%d: `%s --%s`: %s", d.name, u.line, h.resolve(t, u.cmd), f.name, "no such flag in its --help")
				}
				defaults := flagDefaults(help)
				for _, f := range u.flags {
					if f.stated == "" {
						continue
					}
					stated++
					def, known := defaults[f.name]
					switch {
					case f.stated == "none" || f.stated == "off":
						if known && def != "" && def != "false" && def != "0" {
							t.Errorf("%s:%d: --%s has no default, the doc says; `%s --help` says %s", d.name, u.line, f.name, h.resolve(t, u.cmd), def)
						}
					case def != "" && !sameValue(f.stated, def): // none shown: computed at run time (--state, --lease)
						t.Errorf("%s:%d: --%s defaults to %s, the doc says; `%s --help` says %s", d.name, u.line, f.name, f.stated, h.resolve(t, u.cmd), def)
					}
				}
			}
			// "`MOCKFLUX_LISTEN` default `127.0.0.1:8083`": a variable's default is its flag's.
			for i, l := range d.lines {
				for _, m := range envDefault.FindAllStringSubmatch(l, -1) {
					stated++
					value := m[2] + m[3]
					def, ok := byEnv[m[1]]
					if !ok {
						t.Errorf("%s:%d: `%s` default %s: no flag of any binary falls back to %s with a default", d.name, i+1, m[1], value, m[1])
					} else if !sameValue(value, def) {
						t.Errorf("%s:%d: %s defaults to %s, the doc says; its flag's --help says %s", d.name, i+1, m[1], value, def)
					}
				}
			}
		}
	})

	t.Run("usage blocks", func(t *testing.T) {
		n := 0
		defer func() { t.Logf("%d usage blocks", n) }()
		for _, d := range docs {
			for _, b := range d.blocks {
				if b.lang != "" || len(b.lines) == 0 {
					continue
				}
				first := strings.Fields(b.lines[0])
				if len(first) == 0 || !binaries[first[0]] {
					continue
				}
				n++
				cs := commandsIn(b.lines[0])
				want := usageLines(h.forCommand(t, cs[0].command))
				if got := strings.Join(b.lines, "\n"); got != want {
					t.Errorf("%s:%d: the usage block is not `%s --help`'s; it should read\n%s\nnot\n%s", d.name, b.line, h.resolve(t, cs[0].command), want, got)
				}
			}
		}
	})

	t.Run("secrets from files", func(t *testing.T) {
		ops := docOf(t, docs, "docs/operations.md")
		listed := map[string]map[string]bool{}
		for _, r := range ops.rows {
			if r.heading != "Secrets from files (`*_FILE`)" || len(r.cells) < 2 {
				continue
			}
			binary := strings.Trim(strings.TrimSpace(r.cells[0]), "`")
			if !binaries[binary] {
				continue
			}
			listed[binary] = map[string]bool{}
			for _, name := range envName.FindAllString(r.cells[1], -1) {
				listed[binary][name] = true
			}
		}
		if len(listed) == 0 {
			t.Fatal("docs/operations.md has no table of secrets under the heading Secrets from files (`*_FILE`)")
		}
		for _, binary := range slices.Sorted(maps.Keys(binaries)) {
			secrets := map[string]bool{}
			for _, c := range h.commands(t) {
				if strings.Fields(c)[0] == binary {
					for _, m := range fileVariant.FindAllStringSubmatch(h.of(t, c), -1) {
						secrets[m[1]] = true
					}
				}
			}
			if !maps.Equal(listed[binary], secrets) {
				t.Errorf("docs/operations.md, Secrets from files: %s lists %v; its --help says %v may come from files",
					binary, slices.Sorted(maps.Keys(listed[binary])), slices.Sorted(maps.Keys(secrets)))
			}
		}
	})
}

// binaries are the programs a user runs, as the docs name them.
var binaries = map[string]bool{"hubu": true, "hubuctl": true, "gongbu": true, "mockflux": true, "hubu-unified-mcp": true}

var (
	// makeCommand is `make TARGET` where a command starts.
	makeCommand = regexp.MustCompile(`(?:^|[\s;&|(])make\s+([a-z][a-z0-9-]*)`)
	// envName is a setting of ours; the prefixes are the binaries' and the stack's.
	envName = regexp.MustCompile(`\b(?:HUBU|GONGBU|MOCKFLUX|ROUTER)_[A-Z0-9_]*[A-Z0-9]\b`)
	// envDefault is "`NAME` default `VALUE`" or "`NAME` default 24".
	envDefault = regexp.MustCompile("`((?:HUBU|GONGBU|MOCKFLUX|ROUTER)_[A-Z0-9_]+)` default (?:`([^`]+)`|([0-9][0-9a-z.]*))")
	// fileVariant is a secret's file form in --help: NAME_FILE.
	fileVariant = regexp.MustCompile(`\b([A-Z][A-Z0-9_]*[A-Z0-9])_FILE\b`)
)

// testSettings are variables the docs name that only tests read, each with where.
var testSettings = map[string]string{
	"HUBU_INTEROP":        "e2e/interop: the real-harness tests run only when make interop sets it",
	"HUBU_CHAOS_LOGS":     "e2e/chaos_test.go: where a failed fault-explorer run keeps its logs",
	"HUBU_TEST_ARTIFACTS": "the console's browser test: where its screenshots go",
}

// docFile is one Markdown file, split into what the checks read.
type docFile struct {
	name   string // from the repository's root, as failures name it
	lines  []string
	spans  []fragment // inline code outside fenced blocks
	blocks []block
	rows   []tableRow
}

type fragment struct {
	line int
	text string
}

type block struct {
	line  int // of the opening fence
	lang  string
	lines []string
}

type tableRow struct {
	line    int
	heading string // the section the table is in
	cells   []string
}

// codeSpan is `code`; a backslash escapes the next character (tables write \| in code).
var codeSpan = regexp.MustCompile("`((?:\\\\.|[^`\\\\])+)`")

func readDocs(t *testing.T, root string) []docFile {
	t.Helper()
	names, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	names = append([]string{filepath.Join(root, "README.md")}, names...)
	var docs []docFile
	for _, path := range names {
		name := filepath.ToSlash(must(filepath.Rel(root, path))(t))
		d := docFile{name: name, lines: strings.Split(string(must(os.ReadFile(path))(t)), "\n")}
		heading := ""
		var fence *block
		var para []string
		paraLine := 0
		flush := func() {
			text := strings.Join(para, "\n")
			for _, m := range codeSpan.FindAllStringSubmatchIndex(text, -1) {
				line := paraLine + strings.Count(text[:m[0]], "\n")
				d.spans = append(d.spans, fragment{line, unescape(text[m[2]:m[3]])})
			}
			para = nil
		}
		for i, l := range d.lines {
			switch {
			case fence != nil && strings.HasPrefix(l, "```"):
				d.blocks = append(d.blocks, *fence)
				fence = nil
			case fence != nil:
				fence.lines = append(fence.lines, l)
			case strings.HasPrefix(l, "```"):
				flush()
				fence = &block{line: i + 1, lang: strings.TrimPrefix(l, "```")}
			case strings.TrimSpace(l) == "" || strings.HasPrefix(l, "#") || strings.HasPrefix(l, "|"):
				flush()
				if strings.HasPrefix(l, "#") {
					heading = strings.TrimSpace(strings.TrimLeft(l, "#"))
				}
				if strings.HasPrefix(l, "|") && !strings.HasPrefix(l, "|---") {
					d.rows = append(d.rows, tableRow{line: i + 1, heading: heading, cells: cellsOf(l)})
					para, paraLine = []string{l}, i+1
					flush()
				}
			default:
				if para == nil {
					paraLine = i + 1
				}
				para = append(para, l)
			}
		}
		flush()
		docs = append(docs, d)
	}
	return docs
}

func docOf(t *testing.T, docs []docFile, name string) docFile {
	t.Helper()
	for _, d := range docs {
		if d.name == name {
			return d
		}
	}
	t.Fatalf("%s is missing", name)
	return docFile{}
}

// cellsOf splits a table row at the pipes that are not escaped.
func cellsOf(row string) []string {
	var cells []string
	var b strings.Builder
	for i := 0; i < len(row); i++ {
		switch {
		case row[i] == '\\' && i+1 < len(row) && row[i+1] == '|':
			b.WriteString(`\|`)
			i++
		case row[i] == '|':
			cells = append(cells, b.String())
			b.Reset()
		default:
			b.WriteByte(row[i])
		}
	}
	if len(cells) > 0 {
		cells = cells[1:] // before the first pipe
	}
	return cells
}

func unescape(code string) string {
	return strings.ReplaceAll(strings.ReplaceAll(code, `\|`, "|"), "\n", " ")
}

// code is every piece of code in the file: its spans and the logical lines of its shell blocks.
func (d docFile) code() []fragment {
	out := slices.Clone(d.spans)
	for _, b := range d.blocks {
		if isShell(b.lang) {
			out = append(out, shellLines(b)...)
		}
	}
	return out
}

func isShell(lang string) bool {
	return lang == "" || lang == "sh" || lang == "console" || lang == "bash"
}

// shellLines joins a block's continued lines (ending in a backslash), each with the line it starts on.
func shellLines(b block) []fragment {
	var out []fragment
	var cur []string
	start := 0
	for i, l := range b.lines {
		if cur == nil {
			start = b.line + 1 + i
		}
		l = strings.TrimPrefix(l, "$ ")
		if strings.HasSuffix(l, `\`) {
			cur = append(cur, strings.TrimSuffix(l, `\`))
			continue
		}
		out = append(out, fragment{start, strings.Join(append(cur, l), " ")})
		cur = nil
	}
	return out
}

// command is a binary and the words after it that name a subcommand (hubu operator create).
type command struct {
	binary string
	words  []string
}

// use is what one place in the docs says of a command: the flags it gives it, and the
// defaults it states for them.
type use struct {
	line  int
	cmd   command
	flags []statedFlag
}

type statedFlag struct {
	name   string
	stated string // a default the doc states: a value, "none" or "off"; empty when it states none
}

// rowDefault is "default `V`" in a row of one flag's settings. flagDefault is the operations
// guide's "`--flag[ ARG]` (`ENV`, `V`" or "(`ENV`, none", "`--flag` (`ENV`, default `V`)" and
// "`--flag` (24h)".
var rowDefault = regexp.MustCompile("default `([^`]+)`")

var flagDefault = regexp.MustCompile("`--([a-z][a-z0-9-]*)(?: [^`]*)?` \\((?:`[A-Z0-9_]+`, (?:default )?(?:`([^`]+)`|(none|off)\\b)|([0-9][0-9a-z.]*)\\))")

// uses finds every command line of a binary in the file and the flags given to it: in code
// spans and shell blocks, where a binary's name starts a command; in table rows whose first
// cell is such a command (the rest of the row is its settings, except a flag the text just
// before gives another binary); and in the rows of a table under a binary's own heading.
func (d docFile) uses() []use {
	var out []use
	for _, s := range d.spans {
		for _, c := range commandsIn(s.text) {
			out = append(out, use{s.line, c.command, flagsOf(c.flags)})
		}
	}
	for _, b := range d.blocks {
		if !isShell(b.lang) {
			continue
		}
		for _, l := range shellLines(b) {
			for _, c := range commandsIn(l.text) {
				out = append(out, use{l.line, c.command, flagsOf(c.flags)})
			}
		}
	}
	for _, r := range d.rows {
		if len(r.cells) < 2 {
			continue
		}
		first := codeSpan.FindStringSubmatch(r.cells[0])
		if first == nil {
			continue
		}
		var owner command
		stated := map[string]string{}
		if cs := commandsIn(unescape(first[1])); len(cs) > 0 {
			owner = cs[0].command
		} else if f := strings.Fields(r.heading); len(f) > 0 && binaries[f[0]] && strings.HasPrefix(first[1], "--") {
			// A table of one binary's settings, a flag a row: "| `--wait` | `ROUTER_WAIT` | … (default `30s` …".
			owner = command{binary: f[0]}
			if m := rowDefault.FindStringSubmatch(strings.Join(r.cells[1:], "|")); m != nil {
				stated[flagName(strings.Fields(unescape(first[1]))[0])] = m[1]
			}
		} else {
			continue
		}
		for _, m := range flagDefault.FindAllStringSubmatch(strings.Join(r.cells, "|"), -1) {
			if v := m[2] + m[3] + m[4]; !envName.MatchString(v) { // not "`--a`, `--b` (`A`, `B`"
				stated[m[1]] = v
			}
		}
		var flags []statedFlag
		for ci, cell := range r.cells {
			last := 0
			for _, m := range codeSpan.FindAllStringSubmatchIndex(cell, -1) {
				before := cell[last:m[0]]
				last = m[1]
				if ci > 0 && namesAnotherBinary(before, owner.binary) {
					continue
				}
				span := unescape(cell[m[2]:m[3]])
				if !strings.HasPrefix(span, "--") {
					continue
				}
				name := flagName(strings.Fields(span)[0])
				if name == "" {
					continue
				}
				flags = append(flags, statedFlag{name, stated[name]})
			}
		}
		out = append(out, use{r.line, owner, flags})
	}
	return out
}

// namesAnotherBinary reports whether prose names a binary other than own ("such as mockflux with").
func namesAnotherBinary(prose, own string) bool {
	for _, w := range strings.FieldsFunc(prose, func(r rune) bool { return !(r >= 'a' && r <= 'z' || r == '-') }) {
		if binaries[w] && w != own {
			return true
		}
	}
	return false
}

func flagsOf(names []string) []statedFlag {
	out := make([]statedFlag, len(names))
	for i, n := range names {
		out[i] = statedFlag{name: n}
	}
	return out
}

type commandLine struct {
	command
	flags []string
}

// commandsIn finds the binaries' command lines in a line of shell or a code span: a binary's
// name (bare, or a path ending in it) where a command starts, up to two lower-case words after
// it that may name a subcommand, and the --flags that follow.
func commandsIn(text string) []commandLine {
	var out []commandLine
	var cur *commandLine
	atStart, inWords := true, false
	end := func() {
		if cur != nil {
			out = append(out, *cur)
		}
		cur, atStart = nil, true
	}
	for _, tok := range strings.Fields(text) {
		if strings.HasPrefix(tok, "#") {
			break // a comment
		}
		separator := false
		if s, ok := strings.CutSuffix(tok, ";"); ok {
			tok, separator = s, true
		}
		switch tok {
		case "|", "||", "&&", "&", "--", "(", "{", "}", "then", "do", "":
			end()
			continue
		}
		tok = strings.TrimPrefix(tok, "$(")
		switch {
		case atStart && (assignment.MatchString(tok) || tok == "env" || tok == "exec" || tok == "sudo" || tok == "$"):
		case atStart:
			atStart = false
			if name := filepath.Base(tok); binaries[name] && !strings.HasSuffix(tok, "/") && (tok == name || strings.Contains(tok, "/")) {
				cur, inWords = &commandLine{command: command{binary: name}}, true
			}
		case cur == nil:
		case inWords && len(cur.words) < 2 && subcommandWord.MatchString(tok):
			cur.words = append(cur.words, tok)
		default:
			inWords = false
			if name := flagName(tok); name != "" {
				cur.flags = append(cur.flags, name)
			}
		}
		if separator {
			end()
		}
	}
	end()
	return out
}

var (
	assignment     = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)
	subcommandWord = regexp.MustCompile(`^[a-z][a-z-]*$`)
	flagToken      = regexp.MustCompile(`^--([a-z][a-z0-9-]*)(?:$|[=\[\])|,.;:])`)
)

// flagName is NAME of a token --NAME, --NAME=V or [--NAME, else "".
func flagName(tok string) string {
	m := flagToken.FindStringSubmatch(strings.TrimLeft(tok, "[("))
	if m == nil {
		return ""
	}
	return m[1]
}

// helps runs the binaries' --help once per command.
type helps struct {
	bin  string
	mu   sync.Mutex
	out  map[string]string // by command line, such as "gongbu reconcile"
	cmds []string
}

// of is the --help of a command line ("hubuctl agent create"), stdout and stderr together;
// "" when the binary refuses it (not a command).
func (h *helps) of(t *testing.T, line string) string {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	if out, ok := h.out[line]; ok {
		return out
	}
	args := strings.Fields(line)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(h.bin, args[0]), append(args[1:], "--help")...)
	cmd.Env = []string{} // the defaults --help shows are the built-in ones anyway; nothing can start
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("`%s --help` did not finish within 20 s", line)
	}
	if err != nil {
		out = nil
	}
	h.out[line] = string(out)
	return string(out)
}

// resolve is the longest prefix of the command's words that the binary takes as a command.
func (h *helps) resolve(t *testing.T, c command) string {
	t.Helper()
	for n := len(c.words); n >= 0; n-- {
		line := strings.Join(append([]string{c.binary}, c.words[:n]...), " ")
		if h.of(t, line) != "" {
			return line
		}
	}
	t.Fatalf("`%s --help` fails", c.binary)
	return ""
}

func (h *helps) forCommand(t *testing.T, c command) string {
	t.Helper()
	return h.of(t, h.resolve(t, c))
}

// commands are every binary and every command its --help lists.
func (h *helps) commands(t *testing.T) []string {
	t.Helper()
	if h.cmds != nil {
		return h.cmds
	}
	seen := map[string]bool{}
	for _, b := range slices.Sorted(maps.Keys(binaries)) {
		seen[b] = true
		top := h.of(t, b)
		lines := strings.Split(top, "\n")
		if b == "hubuctl" {
			_, commands, _ := strings.Cut(top, "\ncommands:\n")
			commands, _, _ = strings.Cut(commands, "\n\n")
			lines = nil
			for _, l := range strings.Split(commands, "\n") {
				lines = append(lines, "  hubuctl "+strings.TrimSpace(l))
			}
		}
		for _, l := range lines {
			for _, c := range commandsIn(strings.TrimSpace(l)) {
				if c.binary == b && len(c.words) > 0 {
					seen[h.resolve(t, c.command)] = true
				}
			}
		}
	}
	h.cmds = slices.Sorted(maps.Keys(seen))
	return h.cmds
}

// defaultsByEnv is each variable's default, from the flag that falls back to it.
func (h *helps) defaultsByEnv(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, c := range h.commands(t) {
		for _, f := range parseFlags(h.of(t, c)) {
			if f.env != "" && f.def != "" {
				out[f.env] = f.def
			}
		}
	}
	return out
}

type helpFlag struct{ name, env, def string }

var (
	flagEntry = regexp.MustCompile(`^  -([a-z][a-z0-9-]*)`)
	flagEnv   = regexp.MustCompile(`\(env ([A-Z0-9_]+)`)
	flagDef   = regexp.MustCompile(`\(default (.*)\)$`)
)

// parseFlags reads the flag package's listing in a --help: "  -name type" and its indented usage.
func parseFlags(help string) []helpFlag {
	var out []helpFlag
	for _, l := range strings.Split(help, "\n") {
		if m := flagEntry.FindStringSubmatch(l); m != nil {
			out = append(out, helpFlag{name: m[1]})
			continue
		}
		if len(out) == 0 || !strings.HasPrefix(l, "    \t") {
			continue
		}
		f := &out[len(out)-1]
		if m := flagEnv.FindStringSubmatch(l); m != nil && f.env == "" {
			f.env = m[1]
		}
		if m := flagDef.FindStringSubmatch(l); m != nil {
			f.def = strings.Trim(m[1], `"`)
		}
	}
	return out
}

func flagDefaults(help string) map[string]string {
	out := map[string]string{}
	for _, f := range parseFlags(help) {
		out[f.name] = f.def
	}
	return out
}

// hasFlag reports whether a --help shows the flag, in its usage lines or its flag listing.
func hasFlag(help, name string) bool {
	return regexp.MustCompile(`(?m)(?:^|[\s\[(|,])--?` + regexp.QuoteMeta(name) + `(?:$|[\s=\[\]),|])`).MatchString(help)
}

// sameValue compares a default as the doc states it with the one --help shows: 60s is 1m0s.
func sameValue(stated, shown string) bool {
	if stated == shown {
		return true
	}
	a, errA := time.ParseDuration(stated)
	b, errB := time.ParseDuration(shown)
	return errA == nil && errB == nil && a == b
}

// usageLines are the command lines under "usage:" in a --help, as a block shows them.
func usageLines(help string) string {
	lines := strings.Split(help, "\n")
	for i, l := range lines {
		if rest, ok := strings.CutPrefix(l, "usage: "); ok {
			return rest
		}
		if l != "usage:" {
			continue
		}
		var out []string
		for _, u := range lines[i+1:] {
			if !strings.HasPrefix(u, "  ") {
				break
			}
			out = append(out, u[2:])
		}
		return strings.Join(out, "\n")
	}
	return ""
}

func makeTargets(t *testing.T, root string) map[string]bool {
	t.Helper()
	targets := map[string]bool{}
	makefile := string(must(os.ReadFile(filepath.Join(root, "Makefile")))(t))
	for _, m := range regexp.MustCompile(`(?m)^([a-z][a-z0-9-]*):([^=]|$)`).FindAllStringSubmatch(makefile, -1) {
		targets[m[1]] = true
	}
	return targets
}

// programs is what could read a setting: the names in the Go code that is not a test, the
// Makefile and the shell scripts; and which of testSettings the tests read.
type programs struct {
	names    map[string]bool
	testCode map[string]bool
}

var upperName = regexp.MustCompile(`\b[A-Z][A-Z0-9_]*[A-Z0-9]\b`)

func programText(t *testing.T, root string) *programs {
	t.Helper()
	p := &programs{names: map[string]bool{}, testCode: map[string]bool{}}
	err := filepath.WalkDir(root, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() {
			switch e.Name() {
			case ".git", "node_modules", "testdata", ".hubu", "bin", "dist":
				return filepath.SkipDir
			}
			return nil
		}
		name := e.Name()
		if !strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, ".sh") && name != "Makefile" {
			return nil
		}
		text := string(must(os.ReadFile(path))(t))
		if strings.HasSuffix(name, "_test.go") {
			for setting := range testSettings {
				if strings.Contains(text, `"`+setting+`"`) {
					p.testCode[setting] = true
				}
			}
			return nil
		}
		for _, n := range upperName.FindAllString(text, -1) {
			p.names[n] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// reads says what is wrong with a variable the docs name, or "" when a program reads it.
// NAME_FILE is read where a binary's --help says NAME may come from a file (kit/command reads
// it for every secret).
func (p *programs) reads(name, helpText string) string {
	if _, ok := strings.CutSuffix(name, "_FILE"); ok {
		if strings.Contains(helpText, name) {
			return ""
		}
		return "names a file no binary reads: no --help says that setting may come from a file"
	}
	if p.names[name] {
		return ""
	}
	if _, ok := testSettings[name]; ok {
		return ""
	}
	return "is read by no program (Go outside tests, the Makefile, scripts): fix the doc, or list it in testSettings if only tests read it"
}
