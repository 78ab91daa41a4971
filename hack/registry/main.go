// Command registry is the image registry of `make demo-images`:
// go-containerregistry's in-memory registry on a free loopback port, and
// a client that pushes a small random image to it. Nothing leaves the
// machine; the registry's images are gone when it stops.
//
//	registry serve ADDRFILE   serve until SIGTERM/SIGINT; host:port is
//	                          written to ADDRFILE once it listens
//	registry push IMAGE:TAG   push a random image as IMAGE:TAG (plain HTTP)
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

func main() {
	if len(os.Args) != 3 || (os.Args[1] != "serve" && os.Args[1] != "push") {
		fmt.Fprintln(os.Stderr, "usage: registry serve ADDRFILE | registry push IMAGE:TAG")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "serve":
		err = serve(os.Args[2])
	case "push":
		err = push(os.Args[2])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "registry:", err)
		os.Exit(1)
	}
}

func serve(addrFile string) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           registry.New(registry.Logger(log.New(io.Discard, "", 0))),
		ReadHeaderTimeout: 10 * time.Second,
	}
	// Written after the listener is open: a reader of the file can
	// connect at once.
	if err := os.WriteFile(addrFile, []byte(ln.Addr().String()+"\n"), 0o644); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		return err
	}
	if err := <-done; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func push(image string) error {
	ref, err := name.NewTag(image, name.Insecure)
	if err != nil {
		return fmt.Errorf("%s is not an image with a tag: %w", image, err)
	}
	img, err := random.Image(256, 1)
	if err != nil {
		return err
	}
	if err := remote.Write(ref, img); err != nil {
		return fmt.Errorf("push %s: %w", ref, err)
	}
	d, err := img.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("pushed %s@%s\n", ref, d)
	return nil
}
