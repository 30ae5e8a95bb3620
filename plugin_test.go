package tulip_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tulip-temporal/tulip"
)

// observer is an Observer for the typed-nil checks.
type observer struct{ tulip.Observer }

// NewPlugin refuses a typed nil in an interface option, naming it, with
// tulip.BadInput; the same options unset, or set, are taken.
func TestNewPluginRefusesTypedNil(t *testing.T) {
	var nilObserver *observer
	var nilStore *tulip.DirStore
	cases := []struct {
		name   string
		opts   tulip.Options
		option string
	}{
		{"observer", tulip.Options{Observer: nilObserver}, "Observer"},
		{"thread store", tulip.Options{ThreadStore: nilStore}, "ThreadStore"},
		{"hook", tulip.Options{Hooks: map[string]tulip.Hook{"h": nil}}, `Hooks["h"]`},
		{"model", tulip.Options{Models: map[string]tulip.Model{"m": tulip.ModelFunc(nil)}}, `Models["m"]`},
		{"toolset", tulip.Options{Tools: []tulip.Toolset{nil}}, "Tools[0]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := tulip.NewPlugin(c.opts)
			require.Error(t, err)
			assert.Equal(t, tulip.BadInput, tulip.KindOf(err))
			assert.Contains(t, err.Error(), "Options."+c.option)
		})
	}
	_, err := tulip.NewPlugin(tulip.Options{})
	assert.NoError(t, err, "unset options are fine")
	_, err = tulip.NewPlugin(tulip.Options{Observer: &observer{}})
	assert.NoError(t, err, "a real observer is fine")
}
