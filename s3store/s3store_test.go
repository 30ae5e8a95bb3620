package s3store

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseURL(t *testing.T) {
	yes := true
	no := false
	for _, tc := range []struct {
		url  string
		want Options
		err  string
	}{
		{url: "s3://threads", want: Options{Bucket: "threads"}},
		{url: "s3://threads/tenant-a/", want: Options{Bucket: "threads", Prefix: "tenant-a/"}},
		{url: "s3://b/p?region=eu-west-1", want: Options{Bucket: "b", Prefix: "p", Region: "eu-west-1"}},
		{url: "s3://b?endpoint=http://127.0.0.1:8333&path_style=true", want: Options{Bucket: "b", Endpoint: "http://127.0.0.1:8333", PathStyle: &yes}},
		{url: "s3://b?path_style=false", want: Options{Bucket: "b", PathStyle: &no}},
		{url: "s3://b?endpiont=http://x", err: `unknown parameter "endpiont"`},
		{url: "s3://b?path_style=maybe", err: "not a boolean"},
		{url: "s3:///prefix", err: "names no bucket"},
		{url: "gs://b", err: "not an s3:// URL"},
		{url: "s3://key:secret@b", err: "credentials do not go in the URL"},
	} {
		t.Run(tc.url, func(t *testing.T) {
			got, err := ParseURL(tc.url)
			if tc.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestBlobKeys(t *testing.T) {
	b := &Bucket{bucket: "b", prefix: "p/"}
	for _, k := range []string{"", "../x", "a/b", ".hidden"} {
		_, err := b.Blobs().key(k)
		assert.Error(t, err, "%q", k)
	}
	k, err := b.Blobs().key("sha256-ab")
	require.NoError(t, err)
	assert.Equal(t, "p/blobs/sha256-ab", k)
	assert.Equal(t, "p/threads/", b.Threads(nil).Key("t1")[:len("p/threads/")])
}

// Without credentials, Open says which variables to set (not the
// metadata service's "no EC2 IMDS role found"); with them it opens.
func TestOpenWithoutCredentials(t *testing.T) {
	dir := t.TempDir()
	for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_WEB_IDENTITY_TOKEN_FILE",
		"AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "none"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	_, err := Open(context.Background(), Options{Bucket: "b", Endpoint: "http://127.0.0.1:1"})
	require.ErrorIs(t, err, ErrNoCredentials)
	assert.Contains(t, err.Error(), "AWS_ACCESS_KEY_ID")
	assert.NotContains(t, err.Error(), "\n")

	t.Setenv("AWS_ACCESS_KEY_ID", "id")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	_, err = Open(context.Background(), Options{Bucket: "b", Endpoint: "http://127.0.0.1:1"})
	require.NoError(t, err)
}
