package busy

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// The test binary doubles as a helper process: with helperEnv set it does
// one thing to its folder, prints "ready", and waits for stdin to close.
const helperEnv = "RECLAIMER_BUSY_HELPER"

func init() {
	if os.Getenv(helperEnv) == "leader-exit" {
		// Locked during init, the main goroutine stays on the main thread
		// (the thread group leader) for good.
		runtime.LockOSThread()
	}
}

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(runHelper(mode, os.Getenv(helperEnv+"_DIR")))
	}
	os.Exit(m.Run())
}

func runHelper(mode, dir string) int {
	fail := func(err error) int {
		fmt.Println("error:", err)
		return 1
	}
	switch mode {
	case "chroot":
		// Root inside dir, working directory outside it: only "root" may
		// make dir busy.
		out, err := unix.Open("/", unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			return fail(err)
		}
		if err := unix.Chroot(dir); err != nil {
			return fail(err)
		}
		if err := unix.Fchdir(out); err != nil {
			return fail(err)
		}
		unix.Close(out)
	case "thread-cwd":
		// One thread with its own filesystem context works in dir; the
		// process's leader does not.
		ready := make(chan error)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread dies with us
			if err := unix.Unshare(unix.CLONE_FS); err != nil {
				ready <- err
				return
			}
			ready <- unix.Chdir(dir)
			select {}
		}()
		if err := <-ready; err != nil {
			return fail(err)
		}
	case "deep-cwd", "deep-file":
		// Work (or hold a file) in a folder deeper than PATH_MAX below dir:
		// its path cannot be read from /proc.
		if err := os.Chdir(dir); err != nil {
			return fail(err)
		}
		name := strings.Repeat("d", 250)
		for range 20 {
			if err := os.Mkdir(name, 0o755); err != nil && !os.IsExist(err) {
				return fail(err)
			}
			if err := os.Chdir(name); err != nil {
				return fail(err)
			}
		}
		if mode == "deep-file" {
			if _, err := unix.Open("held", unix.O_RDWR|unix.O_CREAT, 0o644); err != nil {
				return fail(err)
			}
			if err := os.Chdir("/"); err != nil {
				return fail(err)
			}
		}
	case "fds":
		// Hold many descriptors on files inside dir.
		n, _ := strconv.Atoi(os.Getenv(helperEnv + "_N"))
		var lim unix.Rlimit
		if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err == nil && lim.Cur < lim.Max {
			lim.Cur = lim.Max
			_ = unix.Setrlimit(unix.RLIMIT_NOFILE, &lim)
		}
		for i := 0; i < n; i++ {
			if _, err := unix.Open(fmt.Sprintf("%s/f%d", dir, i%64), unix.O_RDONLY|unix.O_CREAT, 0o644); err != nil {
				return fail(err)
			}
		}
	case "leader-exit":
		// Work in dir and hold a file there, then end the main thread
		// alone: the process lives on in its other threads, and
		// /proc/PID shows no cwd and no descriptors of its own.
		if err := os.Chdir(dir); err != nil {
			return fail(err)
		}
		if _, err := os.Open(dir); err != nil {
			return fail(err)
		}
		go func() {
			_, _ = io.Copy(io.Discard, os.Stdin)
			os.Exit(0)
		}()
		fmt.Println("ready")
		unix.RawSyscall(unix.SYS_EXIT, 0, 0, 0) // this thread only
	case "scan":
		// Scan for dir and tell what was seen (run as another user).
		s, err := Scan(context.Background(), []string{dir}, Options{})
		if err != nil {
			return fail(err)
		}
		fmt.Printf("ready %d %d %d %v\n", s.Processes, s.Denied, s.Failed, s.Busy(dir))
		return 0
	default:
		return fail(fmt.Errorf("unknown helper mode %q", mode))
	}
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}

// child is a process started by a test; it is killed when the test ends.
type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
}

// start runs cmd, waits until it prints "ready" (when wantReady), and
// registers its end.
func start(tb testing.TB, cmd *exec.Cmd, wantReady bool) *child {
	tb.Helper()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	c := &child{cmd: cmd, stdin: stdin}
	tb.Cleanup(c.stop)
	if wantReady {
		line, err := bufio.NewReader(stdout).ReadString('\n')
		if strings.TrimSpace(line) != "ready" {
			c.stop()
			tb.Fatalf("%v: wanted ready, got %q (%v)", cmd.Args, line, err)
		}
	}
	return c
}

// stop kills the child and reaps it, so it is gone from /proc.
func (c *child) stop() {
	if c.cmd.ProcessState != nil {
		return
	}
	_ = c.cmd.Process.Kill()
	_ = c.stdin.Close()
	_ = c.cmd.Wait()
}

func (c *child) pid() int { return c.cmd.Process.Pid }

// helper starts the test binary in helper mode.
func helper(tb testing.TB, mode, dir string, env ...string) *child {
	tb.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+mode, helperEnv+"_DIR="+dir)
	cmd.Env = append(cmd.Env, env...)
	return start(tb, cmd, true)
}
