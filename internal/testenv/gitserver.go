package testenv

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/binary"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// GitServer serves bare repositories in Root over SSH (real protocol, real
// host and client keys, served by the system's git-upload-pack and
// git-receive-pack) and over smart HTTP (the system's git http-backend).
// Repositories are also reachable as file:// URLs.
type GitServer struct {
	// Root holds the bare repositories, one NAME.git directory each.
	Root string
	// HostKey is the server's SSH host public key.
	HostKey ssh.PublicKey
	// DeployKey is the client private key (OpenSSH PEM) the server accepts.
	DeployKey []byte
	// HTTPUser and HTTPPassword, when set before the first request, are
	// required as basic auth by the HTTP endpoint.
	HTTPUser, HTTPPassword string

	sshListener net.Listener
	sshAddr     string
	sshConfig   *ssh.ServerConfig
	httpServer  *httptest.Server
	wg          sync.WaitGroup
	mu          sync.Mutex
	conns       map[net.Conn]struct{}
	// authorized are the keys added with AuthorizeKey, guarded by mu.
	authorized []ssh.PublicKey
	// uploadPacks counts the upload-pack sessions of each repository,
	// guarded by mu.
	uploadPacks map[string]int
}

// UploadPacks is how many times a client has asked repository name
// (as NewRepo named it) for its refs since the server started, over SSH
// and HTTP: every ls-remote, fetch and clone counts one. Tests count the
// requests a fleet of Syncs costs the git host with it.
func (s *GitServer) UploadPacks(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.uploadPacks[name]
}

// countUploadPack counts an upload-pack of the repository at rel, a path
// under Root such as "/fleet.git".
func (s *GitServer) countUploadPack(rel string) {
	name := strings.TrimSuffix(strings.Trim(filepath.Clean("/"+rel), "/"), ".git")
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.uploadPacks == nil {
		s.uploadPacks = map[string]int{}
	}
	s.uploadPacks[name]++
}

// NewGitServer starts a git server for the test; it stops when the test ends.
func NewGitServer(t testing.TB) *GitServer {
	t.Helper()
	s := &GitServer{Root: t.TempDir(), conns: map[net.Conn]struct{}{}}
	if err := s.start(); err != nil {
		t.Fatalf("start git server: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

func (s *GitServer) start() error {
	_, hostPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return err
	}
	hostSigner, err := ssh.NewSignerFromKey(hostPriv)
	if err != nil {
		return err
	}
	s.HostKey = hostSigner.PublicKey()
	clientPub, clientPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return err
	}
	block, err := ssh.MarshalPrivateKey(clientPriv, "driftless test deploy key")
	if err != nil {
		return err
	}
	s.DeployKey = pem.EncodeToMemory(block)
	authorized, err := ssh.NewPublicKey(clientPub)
	if err != nil {
		return err
	}
	s.sshConfig = &ssh.ServerConfig{
		PublicKeyCallback: func(_ ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
			if bytes.Equal(key.Marshal(), authorized.Marshal()) || s.isAuthorized(key) {
				return &ssh.Permissions{}, nil
			}
			return nil, fmt.Errorf("unknown public key")
		},
	}
	s.sshConfig.AddHostKey(hostSigner)
	if err := s.StartSSH(); err != nil {
		return err
	}

	execPath, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		return fmt.Errorf("git --exec-path: %w", err)
	}
	backend := &cgi.Handler{
		Path: filepath.Join(strings.TrimSpace(string(execPath)), "git-http-backend"),
		Env:  []string{"GIT_PROJECT_ROOT=" + s.Root, "GIT_HTTP_EXPORT_ALL=1"},
	}
	s.httpServer = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.HTTPUser != "" {
			user, pass, ok := r.BasicAuth()
			if !ok || user != s.HTTPUser || pass != s.HTTPPassword {
				w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
				http.Error(w, "authentication required", http.StatusUnauthorized)
				return
			}
		}
		if rel, ok := strings.CutSuffix(r.URL.Path, "/info/refs"); ok && r.URL.Query().Get("service") == "git-upload-pack" {
			s.countUploadPack(rel)
		}
		backend.ServeHTTP(w, r)
	}))
	return nil
}

// AuthorizeKey lets the holder of a key in, besides DeployKey: line is
// one authorized_keys line ("ssh-ed25519 AAAA… comment"), such as the
// public key `driftless install` prints for a deploy key.
func (s *GitServer) AuthorizeKey(line string) error {
	key, _, _, _, err := ssh.ParseAuthorizedKey([]byte(line))
	if err != nil {
		return fmt.Errorf("authorize key: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.authorized = append(s.authorized, key)
	return nil
}

func (s *GitServer) isAuthorized(key ssh.PublicKey) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range s.authorized {
		if bytes.Equal(k.Marshal(), key.Marshal()) {
			return true
		}
	}
	return false
}

// KnownHosts returns a known_hosts file that trusts this server's host key.
func (s *GitServer) KnownHosts() []byte {
	return []byte(knownhosts.Line([]string{knownhosts.Normalize(s.sshAddr)}, s.HostKey) + "\n")
}

// SSHAddr is the host:port of the SSH endpoint.
func (s *GitServer) SSHAddr() string { return s.sshAddr }

// StopSSH closes the SSH endpoint and its connections, so that the server
// is unreachable until StartSSH, and waits for the git processes that
// served them to exit; the port stays reserved for no one.
func (s *GitServer) StopSSH() {
	s.mu.Lock()
	if s.sshListener != nil {
		s.sshListener.Close()
		s.sshListener = nil
	}
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// StartSSH (re)opens the SSH endpoint, on the same address as before if it
// had one.
func (s *GitServer) StartSSH() error {
	addr := s.sshAddr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen ssh: %w", err)
	}
	s.mu.Lock()
	s.sshListener = l
	s.sshAddr = l.Addr().String()
	s.mu.Unlock()
	s.wg.Go(func() { s.acceptSSH(l) })
	return nil
}

// Close stops both endpoints and waits for the git processes serving them
// to exit.
func (s *GitServer) Close() {
	s.StopSSH()
	if s.httpServer != nil {
		s.httpServer.Close()
	}
}

func (s *GitServer) acceptSSH(l net.Listener) {
	for {
		conn, err := l.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.conns[conn] = struct{}{}
		s.mu.Unlock()
		s.wg.Go(func() {
			defer func() {
				s.mu.Lock()
				delete(s.conns, conn)
				s.mu.Unlock()
				conn.Close()
			}()
			s.serveSSH(conn)
		})
	}
}

func (s *GitServer) serveSSH(conn net.Conn) {
	_, chans, reqs, err := ssh.NewServerConn(conn, s.sshConfig)
	if err != nil {
		return
	}
	go ssh.DiscardRequests(reqs)
	for newCh := range chans {
		if newCh.ChannelType() != "session" {
			_ = newCh.Reject(ssh.UnknownChannelType, "only session channels")
			continue
		}
		ch, requests, err := newCh.Accept()
		if err != nil {
			continue
		}
		s.wg.Go(func() { s.serveSession(ch, requests) })
	}
}

func (s *GitServer) serveSession(ch ssh.Channel, requests <-chan *ssh.Request) {
	defer ch.Close()
	var env []string
	for req := range requests {
		switch req.Type {
		case "env":
			var kv struct{ Name, Value string }
			if ssh.Unmarshal(req.Payload, &kv) == nil && kv.Name == "GIT_PROTOCOL" {
				env = append(env, kv.Name+"="+kv.Value)
			}
			_ = req.Reply(true, nil)
		case "exec":
			var payload struct{ Command string }
			if err := ssh.Unmarshal(req.Payload, &payload); err != nil {
				_ = req.Reply(false, nil)
				return
			}
			_ = req.Reply(true, nil)
			status := s.runGit(ch, payload.Command, env)
			_, _ = ch.SendRequest("exit-status", false, binary.BigEndian.AppendUint32(nil, uint32(status)))
			return
		default:
			_ = req.Reply(false, nil)
		}
	}
}

// runGit runs "git-upload-pack '<path>'" or "git-receive-pack '<path>'"
// against a repository under Root and returns its exit status.
func (s *GitServer) runGit(ch ssh.Channel, command string, env []string) int {
	verb, arg, _ := strings.Cut(command, " ")
	if verb != "git-upload-pack" && verb != "git-receive-pack" {
		fmt.Fprintf(ch.Stderr(), "unsupported command %q\n", verb)
		return 1
	}
	rel := strings.Trim(strings.TrimSpace(arg), "'\"")
	dir := filepath.Join(s.Root, filepath.Clean("/"+rel))
	if _, err := os.Stat(dir); err != nil {
		fmt.Fprintf(ch.Stderr(), "repository %q not found\n", rel)
		return 1
	}
	if verb == "git-upload-pack" {
		s.countUploadPack(rel)
	}
	cmd := exec.Command("git", strings.TrimPrefix(verb, "git-"), dir)
	cmd.Env = append(os.Environ(), env...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return 1
	}
	cmd.Stdout, cmd.Stderr = ch, ch.Stderr()
	if err := StartTied(cmd); err != nil {
		return 1
	}
	go func() {
		_, _ = io.Copy(stdin, ch)
		stdin.Close()
	}()
	if err := cmd.Wait(); err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode()
		}
		return 1
	}
	return 0
}
