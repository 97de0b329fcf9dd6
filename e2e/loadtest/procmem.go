package loadtest

import (
	"bufio"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Memory is what the kernel says of a process's resident memory, in bytes: the peak (VmHWM,
// since the start or since ResetPeak) and now (VmRSS) from /proc/<pid>/status, and how much of
// now is the process's own executable (from /proc/<pid>/smaps): its code and read-only data,
// pages the kernel shares with the page cache and can drop and read back, unlike the heap and
// the stacks.
type Memory struct {
	PeakBytes    int64 `json:"peak_bytes"`
	CurrentBytes int64 `json:"current_bytes"`
	BinaryBytes  int64 `json:"binary_bytes"`
}

// readMemory reads a process's memory figures.
func readMemory(pid int) (Memory, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return Memory{}, err
	}
	m, err := parseStatus(string(b))
	if err != nil {
		return Memory{}, err
	}
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		return Memory{}, err
	}
	smaps, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		return Memory{}, err
	}
	if m.BinaryBytes, err = mappedRSS(string(smaps), exe); err != nil {
		return Memory{}, err
	}
	return m, nil
}

// parseStatus reads VmHWM and VmRSS from the text of /proc/<pid>/status ("VmRSS:	  1540 kB").
func parseStatus(status string) (Memory, error) {
	var m Memory
	fields := map[string]*int64{"VmHWM": &m.PeakBytes, "VmRSS": &m.CurrentBytes}
	var seen int
	sc := bufio.NewScanner(strings.NewReader(status))
	for sc.Scan() {
		key, rest, ok := strings.Cut(sc.Text(), ":")
		into := fields[key]
		if !ok || into == nil {
			continue
		}
		kb, err := kilobytes(rest)
		if err != nil {
			return Memory{}, fmt.Errorf("unexpected %s line %q", key, sc.Text())
		}
		*into = kb * 1024
		seen++
	}
	if seen != len(fields) {
		return Memory{}, errors.New("no VmHWM and VmRSS lines (a kernel thread, or not Linux)")
	}
	return m, nil
}

// mappedRSS sums the resident size (Rss) of the mappings of file path in the text of
// /proc/<pid>/smaps, where each mapping is a header line ("start-end perms offset dev inode
// path") followed by lines of "Key: value kB".
func mappedRSS(smaps, path string) (int64, error) {
	var total int64
	var inFile, found bool
	sc := bufio.NewScanner(strings.NewReader(smaps))
	for sc.Scan() {
		line := sc.Text()
		key, rest, ok := strings.Cut(line, ":")
		if ok && !strings.Contains(key, " ") { // "Rss:", "Size:", "VmFlags:", ...
			if inFile && key == "Rss" {
				kb, err := kilobytes(rest)
				if err != nil {
					return 0, fmt.Errorf("unexpected smaps line %q", line)
				}
				total += kb * 1024
			}
			continue
		}
		// A mapping's header: its path, when it has one, is the sixth field on.
		f := strings.Fields(line)
		inFile = len(f) >= 6 && strings.Join(f[5:], " ") == path
		found = found || inFile
	}
	if !found {
		return 0, fmt.Errorf("no mapping of %s", path)
	}
	return total, nil
}

// kilobytes reads "   1540 kB" as 1540.
func kilobytes(s string) (int64, error) {
	f := strings.Fields(s)
	if len(f) != 2 || f[1] != "kB" {
		return 0, fmt.Errorf("not a size in kB: %q", s)
	}
	return strconv.ParseInt(f[0], 10, 64)
}

// resetPeak makes the kernel forget a process's peak, so that the next VmHWM is the peak
// since now (writing 5 to clear_refs, Linux 4.0 and later).
func resetPeak(pid int) error {
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0)
}

// pidListening finds the process that listens on the TCP address addr (host:port), through
// the socket's inode in /proc/net/tcp{,6} and the process whose descriptor is that socket.
//
// The stack's processes are started by kit/proctest, which does not say their pids; the
// process serving the port is, in any case, exactly the one whose memory we mean.
func pidListening(addr string) (int, error) {
	host, portText, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, err
	}
	port, err := strconv.ParseUint(portText, 10, 16)
	if err != nil {
		return 0, fmt.Errorf("port of %s: %v", addr, err)
	}
	ip := net.ParseIP(host)
	var inode string
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(table)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, err
		}
		if inode = listeningInode(string(b), ip, uint16(port)); inode != "" {
			break
		}
	}
	if inode == "" {
		return 0, fmt.Errorf("nobody listens on %s", addr)
	}
	want := "socket:[" + inode + "]"
	fds, _ := filepath.Glob("/proc/[0-9]*/fd/*")
	for _, fd := range fds {
		if target, err := os.Readlink(fd); err == nil && target == want {
			// fd is /proc/<pid>/fd/<n>.
			return strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(fd))))
		}
	}
	return 0, fmt.Errorf("no process of ours holds the socket listening on %s", addr)
}

// listeningInode returns the inode of the socket in the text of /proc/net/tcp (or tcp6) that
// listens on port at ip or at the wildcard address, or "".
//
// The table prints an address as the hex of its bytes in the kernel's 32-bit words, each in
// host order: 127.0.0.1 is 0100007F on a little-endian machine. Rather than depend on the
// byte order, a row's address is compared with ip as both orders would print it.
func listeningInode(table string, ip net.IP, port uint16) string {
	const listen = "0A"
	wantPort := fmt.Sprintf("%04X", port)
	for i, line := range strings.Split(table, "\n") {
		f := strings.Fields(line)
		if i == 0 || len(f) < 10 || f[3] != listen {
			continue
		}
		host, p, ok := strings.Cut(f[1], ":")
		if !ok || p != wantPort {
			continue
		}
		if procAddrMatches(host, ip) {
			return f[9]
		}
	}
	return ""
}

func procAddrMatches(hexAddr string, ip net.IP) bool {
	raw, err := hex.DecodeString(hexAddr)
	if err != nil {
		return false
	}
	if allZero(raw) {
		return true // listening on every address
	}
	want := ip.To4()
	if len(raw) == 16 {
		want = ip.To16()
	}
	if len(want) != len(raw) {
		return false
	}
	swapped := make([]byte, len(raw))
	for w := 0; w < len(raw); w += 4 {
		for j := range 4 {
			swapped[w+j] = raw[w+3-j]
		}
	}
	return net.IP(raw).Equal(want) || net.IP(swapped).Equal(want)
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
