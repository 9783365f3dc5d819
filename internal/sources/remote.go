package sources

import (
	"github.com/reclaimer/reclaimer/internal/config"
	"github.com/reclaimer/reclaimer/internal/remote"
)

// Remote sources: sandboxes at a provider, selected by metadata or labels.
// Credentials are never written in the file: the file names an environment
// variable or a file that holds them.

// remoteClient makes the client of a remote source. A credential that
// cannot be read does not stop the command: that source's calls fail with
// the reason, reported like an outage, and the other sources run.
func remoteClient(endpoint, env, file string, rate *float64, auth func(remote.Secret) remote.Auth) (*remote.Client, error) {
	secret, err := remote.LoadSecret(env, file)
	r := 0.0
	if rate != nil {
		r = *rate
	}
	return remote.New(remote.Options{Endpoint: endpoint, Rate: r, Secret: secret, Auth: auth(secret), CredentialErr: err})
}

// keyEnv returns the credential variable in force: none when a file is
// set, else the key's value or its default.
func keyEnv(env, file, def string) string {
	if file != "" {
		return ""
	}
	return orDefault(env, def)
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// credentialPath is a remote table's credential file, as a config.Path.
func credentialPath(key string, file *string) config.Path {
	return config.Path{Key: key, Value: file, Role: config.PathFile}
}
