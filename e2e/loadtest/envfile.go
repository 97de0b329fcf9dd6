package loadtest

import (
	"bufio"
	"errors"
	"fmt"
	"strings"
)

// ParseEnvFile reads the shell KEY='value' lines stack.WriteEnvFile writes (.hubu/stack.env),
// undoing its quoting: a value is single-quoted, and a quote within it closes the quotes, is
// escaped with a backslash and reopens them. Blank lines and # comments are skipped, and a
// leading "export " is allowed. It reads what a POSIX shell would make of each line's one word
// after the =: quoted and backslash-escaped parts and plain characters; anything else (a second
// word, a $ expansion) is an error naming the line.
func ParseEnvFile(text string) (map[string]string, error) {
	env := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		line = strings.TrimPrefix(line, "export ")
		key, word, ok := strings.Cut(line, "=")
		if !ok || !validEnvKey(key) {
			return nil, fmt.Errorf("line %d: not a KEY=value line", n)
		}
		value, err := shellWord(word)
		if err != nil {
			return nil, fmt.Errorf("line %d (%s): %v", n, key, err)
		}
		env[key] = value
	}
	return env, sc.Err()
}

func validEnvKey(k string) bool {
	if k == "" || (k[0] >= '0' && k[0] <= '9') {
		return false
	}
	return strings.Trim(k, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") == ""
}

// shellWord is the value of one shell word made of single-quoted parts, backslash-escaped
// characters and plain ones.
func shellWord(w string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(w); i++ {
		switch c := w[i]; {
		case c == '\'':
			end := strings.IndexByte(w[i+1:], '\'')
			if end < 0 {
				return "", errors.New("a quote that is never closed")
			}
			b.WriteString(w[i+1 : i+1+end])
			i += end + 1
		case c == '\\':
			if i+1 == len(w) {
				return "", errors.New("a backslash at the end")
			}
			i++
			b.WriteByte(w[i])
		case strings.IndexByte(" \t\"$`;&|<>()", c) >= 0:
			return "", fmt.Errorf("unquoted %q: not one word as make up writes it", c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}
