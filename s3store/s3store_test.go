package s3store

import (
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
