package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
)

func init() { subcommands = append(subcommands, newConfigCmd) }

// newConfigCmd prints the effective configuration of `sluice run` for the
// same flags, environment and --config file, with where each value came
// from and secrets masked.
func newConfigCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Print the effective configuration (flags > SLUICE_* environment > --config file > defaults)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := loadAppConfig(cmd, "sluice-<example>")
			if err != nil {
				return err
			}
			values := map[string]string{
				keyAppID:            c.AppID,
				keyBrokers:          strings.Join(c.Brokers, ","),
				keyGuarantee:        c.Guarantee.String(),
				keyCommitInterval:   c.CommitInterval.String(),
				keyStateDir:         c.StateDir,
				keyStandbyReplicas:  strconv.Itoa(c.StandbyReplicas),
				keyStreamThreads:    strconv.Itoa(c.StreamThreads),
				keyFoldUpdates:      strconv.FormatBool(c.FoldUpdates),
				keyAcceptableLag:    strconv.Itoa(c.AcceptableLag),
				keyMaxWarmups:       strconv.Itoa(c.MaxWarmups),
				keyProbeInterval:    c.ProbeInterval.String(),
				keySessionTimeout:   c.SessionTimeout.String(),
				keyInstanceID:       c.InstanceID,
				keyMaxRecordBytes:   strconv.Itoa(c.MaxRecordBytes),
				keyIdleTimeout:      c.IdleTimeout.String(),
				keyMemoryBudget:     formatBytes(c.MemoryBudget),
				keyMemoryGoLimit:    strconv.FormatBool(c.MemoryGoLimit),
				keyPartFetchBytes:   formatBytes(c.PartFetchBytes),
				keyHTTPAddress:      c.HTTPAddress,
				keyHTTPTLSCert:      c.HTTP.Cert,
				keyHTTPTLSKey:       c.HTTP.Key,
				keyHTTPTLSCA:        c.HTTP.CA,
				keyHTTPClientCA:     c.HTTP.ClientCA,
				keyHTTPToken:        tokenValue(c.HTTP),
				keyHTTPTokenFile:    c.HTTP.TokenFile,
				keyLogLevel:         strings.ToLower(c.LogLevel.String()),
				keyLogFormat:        c.LogFormat,
				keySecurityProtocol: c.Security.Protocol,
				keySASLMechanism:    c.Security.Mechanism,
				keySASLUsername:     c.Security.Username,
				keySASLPassword:     passwordValue(c.Security),
				keySASLPasswordFile: c.Security.PasswordFile,
				keySSLCA:            c.Security.CA,
				keySSLCert:          c.Security.Cert,
				keySSLKey:           c.Security.Key,
				keyDBURL:            redactedDBURL(c.DB.URL),
				keyDBPassword:       c.DB.Password,
				keyDBMode:           c.DB.Mode,
				keyDBCreateTables:   strconv.FormatBool(c.DB.CreateTables),
			}
			for _, k := range appKeys {
				fmt.Fprintf(cmd.OutOrStdout(), "%s: %q  # from %s\n", k.key, masked(k.key, values[k.key]), c.sources[k.key])
			}
			return nil
		},
	}
	addAppFlags(cmd)
	return cmd
}

// masked hides the values of keys that hold secrets, so that a printed
// configuration can be pasted into a ticket. Keys naming a file
// (sasl.password.file, ssl.key.location) hold a path, not the secret, and
// the path is what a user debugging a start needs to see.
func masked(key, value string) string {
	if strings.HasSuffix(key, ".file") || strings.HasSuffix(key, ".location") {
		return value
	}
	for _, s := range []string{"password", "secret", "token", "sasl.jaas", "key.pem"} {
		if strings.Contains(key, s) && value != "" {
			return "********"
		}
	}
	return value
}

// passwordValue is what sasl.password itself holds (masked when printed):
// nothing when the password came from sasl.password.file.
func passwordValue(s security) string {
	if s.PasswordFile != "" {
		return ""
	}
	return s.Password.reveal()
}
