package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/spf13/cobra"
)

func init() { subcommands = append(subcommands, newHealthcheckCmd) }

// newHealthcheckCmd is a container healthcheck for the distroless image,
// which has no shell, curl or wget: docker-compose.yml runs
// `/sluice healthcheck --url http://127.0.0.1:9100/readyz` in each replica.
func newHealthcheckCmd() *cobra.Command {
	var (
		target  string
		timeout time.Duration
		ca      string
	)
	cmd := &cobra.Command{
		Use:   "healthcheck --url URL",
		Short: "GET a URL and exit 0 on a 2xx answer (a container healthcheck for images without curl)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			return healthcheck(ctx, target, ca)
		},
	}
	cmd.Flags().StringVar(&target, "url", "", "`URL` to GET, e.g. http://127.0.0.1:9100/readyz (required)")
	cmd.Flags().DurationVar(&timeout, "timeout", 3*time.Second, "give up after this long")
	cmd.Flags().StringVar(&ca, "ca", "", "PEM `file` of the CAs that sign the server's certificate, for an https URL (default: the system's)")
	return cmd
}

// healthcheck GETs target and succeeds on a 2xx status. ca, if not empty,
// names the PEM file of the CAs to trust for https.
func healthcheck(ctx context.Context, target, ca string) error {
	if target == "" {
		return errors.New("healthcheck: --url is required")
	}
	u, err := url.Parse(target)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("healthcheck: --url %q: want http://host:port/path", target)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	cl := http.DefaultClient
	if ca != "" {
		data, err := os.ReadFile(ca)
		if err != nil {
			return fmt.Errorf("healthcheck: --ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(data) {
			return fmt.Errorf("healthcheck: --ca %s: no PEM certificate in the file", ca)
		}
		cl = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	}
	resp, err := cl.Do(req)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	defer resp.Body.Close()
	// Read a little of the body so that the error shows why (readyz
	// answers with the instance's status).
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("healthcheck: GET %s: %s: %s", target, resp.Status, body)
	}
	return nil
}
