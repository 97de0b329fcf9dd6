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

// Memory is what /proc/<pid>/status says of a process's resident memory, in bytes: the
// peak (VmHWM, since the start or since ResetPeak), now (VmRSS), and how much of now is pages
// mapped from files (RssFile): for our static binaries, their own code and read-only data,
// which the kernel shares and can drop and read again, unlike the heap and the stacks.
type Memory struct {
	PeakBytes    int64 `json:"peak_bytes"`
	CurrentBytes int64 `json:"current_bytes"`
	FileBytes    int64 `json:"file_bytes"`
}

// readMemory reads a process's memory figures.
func readMemory(pid int) (Memory, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return Memory{}, err
	}
	return parseStatus(string(b))
}

// parseStatus reads VmHWM, VmRSS and RssFile from the text of /proc/<pid>/status
// ("VmRSS:	  1540 kB").
func parseStatus(status string) (Memory, error) {
	var m Memory
	fields := map[string]*int64{"VmHWM": &m.PeakBytes, "VmRSS": &m.CurrentBytes, "RssFile": &m.FileBytes}
	var seen int
	sc := bufio.NewScanner(strings.NewReader(status))
	for sc.Scan() {
		key, rest, ok := strings.Cut(sc.Text(), ":")
		into := fields[key]
		if !ok || into == nil {
			continue
		}
		value := strings.Fields(rest)
		if len(value) != 2 || value[1] != "kB" {
			return Memory{}, fmt.Errorf("unexpected %s line %q", key, sc.Text())
		}
		kb, err := strconv.ParseInt(value[0], 10, 64)
		if err != nil {
			return Memory{}, fmt.Errorf("unexpected %s line %q", key, sc.Text())
		}
		*into = kb * 1024
		seen++
	}
	if seen != len(fields) {
		return Memory{}, errors.New("no VmHWM, VmRSS and RssFile lines (a kernel thread, or not Linux 4.5 or later)")
	}
	return m, nil
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
