package docs_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/policycheck/policycheck/internal/testkit/servetest"
)

// manifest is the part of docs/deploying.md's pod the test reads.
type manifest struct {
	Spec struct {
		Containers []struct {
			Name           string
			Args           []string
			ReadinessProbe struct {
				HTTPGet struct {
					Path string
					Port int
				} `yaml:"httpGet"`
			} `yaml:"readinessProbe"`
			VolumeMounts []struct {
				Name      string
				MountPath string `yaml:"mountPath"`
			} `yaml:"volumeMounts"`
		}
		Volumes []struct {
			Name      string
			ConfigMap *struct{ Name string } `yaml:"configMap"`
		}
	}
}

// configMapVolume lays files out as the kubelet mounts a ConfigMap: in a
// ..<timestamp> directory, reached through ..data and a link per file.
func configMapVolume(t *testing.T, dir string, files map[string][]byte) {
	t.Helper()
	real := filepath.Join(dir, "..2026_12_02_10_00_00.000000000")
	require.NoError(t, os.MkdirAll(real, 0o755))
	require.NoError(t, os.Symlink(filepath.Base(real), filepath.Join(dir, "..data")))
	for name, b := range files {
		require.NoError(t, os.WriteFile(filepath.Join(real, name), b, 0o644))
		require.NoError(t, os.Symlink(filepath.Join("..data", name), filepath.Join(dir, name)))
	}
}

// configMapUpdate updates a volume configMapVolume laid out as the kubelet
// does: the files in a new ..<timestamp> directory, and ..data pointed at
// it in one rename.
func configMapUpdate(t *testing.T, dir string, files map[string][]byte) {
	t.Helper()
	real := filepath.Join(dir, "..2026_12_02_10_05_00.000000000")
	require.NoError(t, os.MkdirAll(real, 0o755))
	for name, b := range files {
		require.NoError(t, os.WriteFile(filepath.Join(real, name), b, 0o644))
	}
	require.NoError(t, os.Symlink(filepath.Base(real), filepath.Join(dir, "..data_tmp")))
	require.NoError(t, os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")))
}

// TestDeployingManifest starts serve with the arguments of
// docs/deploying.md's pod, its volumes laid out as the kubelet mounts
// them (the example registry and the example policies as ConfigMaps),
// and checks what the page says: the readiness probe's path and port
// answer on the diagnostic address, nothing else is served there, a
// decision is made over the socket, and an update of the registry's
// ConfigMap decides the next requests without a restart.
func TestDeployingManifest(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the command")
	}
	blocks := codeBlocks(t, "deploying.md", "yaml")
	require.Len(t, blocks, 1)
	var pod manifest
	require.NoError(t, yaml.Unmarshal([]byte(blocks[0]), &pod))
	var found bool
	for _, c := range pod.Spec.Containers {
		if c.Name != "policycheck" {
			continue
		}
		found = true
		require.Equal(t, "serve", c.Args[0])
		// Each mount is a temporary directory.
		mounts := map[string]string{}
		for _, m := range c.VolumeMounts {
			dir := t.TempDir()
			mounts[m.MountPath] = dir
			switch m.Name {
			case "registry":
				b, err := os.ReadFile("../examples/registry.yaml")
				require.NoError(t, err)
				configMapVolume(t, dir, map[string][]byte{"registry.yaml": b})
			case "policies":
				files := map[string][]byte{}
				rego, err := filepath.Glob("../examples/policies/*/*.rego")
				require.NoError(t, err)
				for _, f := range rego {
					if strings.HasSuffix(f, "_test.rego") {
						continue
					}
					b, err := os.ReadFile(f)
					require.NoError(t, err)
					files[filepath.Base(f)] = b
				}
				configMapVolume(t, dir, files)
			}
		}
		var args []string
		diagPort := ""
		for i, a := range c.Args[1:] {
			for mount, dir := range mounts {
				a = strings.Replace(a, mount, dir, 1)
			}
			if i > 0 && c.Args[i] == "--diagnostic-addr" {
				diagPort = a[strings.LastIndexByte(a, ':')+1:]
				a = "127.0.0.1:0"
			}
			args = append(args, a)
		}
		require.Equal(t, diagPort, strconv.Itoa(c.ReadinessProbe.HTTPGet.Port), "the probe's port is the diagnostic address's")

		p := servetest.Start(t, servetest.Build(t), args...)
		require.NotEmpty(t, p.Socket, "the decision API is on the socket")
		m := regexp.MustCompile(`"msg":"policycheck diagnostics serving","addr":"([^"]+)"`).FindStringSubmatch(p.Said)
		require.NotNil(t, m, p.Said)
		resp, err := http.Get("http://" + m[1] + c.ReadinessProbe.HTTPGet.Path)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)

		hist, err := os.ReadFile("../examples/histories/refund.json")
		require.NoError(t, err)
		body := append(append([]byte(`{"history": `), hist...), '}')
		resp, err = http.Post("http://"+m[1]+"/v1/decide", "application/json", bytes.NewReader(body))
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusNotFound, resp.StatusCode, "the diagnostic port answers nothing else")

		client := p.Client()
		defer client.CloseIdleConnections()
		// An administrator: the example policies hide no tool from one.
		admin := append(append(append([]byte{}, body[:len(body)-1]...), `, "context": {"group": "admin"}`...), '}')
		available := func() []string {
			resp, err := client.Post(p.URL+"/v1/decide", "application/json", bytes.NewReader(admin))
			require.NoError(t, err)
			defer resp.Body.Close()
			require.Equal(t, http.StatusOK, resp.StatusCode)
			var d struct{ Available []string }
			require.NoError(t, json.NewDecoder(resp.Body).Decode(&d))
			return d.Available
		}
		require.NotContains(t, available(), "new_tool")
		fi, err := os.Stat(p.Socket)
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o660), fi.Mode().Perm())

		registryRevision := func() string {
			resp, err := http.Get("http://" + m[1] + "/health")
			require.NoError(t, err)
			defer resp.Body.Close()
			var h struct {
				RegistryRevision string `json:"registry_revision"`
			}
			require.NoError(t, json.NewDecoder(resp.Body).Decode(&h))
			return h.RegistryRevision
		}
		rev := registryRevision()
		reg, err := os.ReadFile("../examples/registry.yaml")
		require.NoError(t, err)
		configMapUpdate(t, mounts["/etc/policycheck/registry"], map[string][]byte{"registry.yaml": append(reg, "  - name: new_tool\n"...)})
		require.Eventually(t, func() bool { return registryRevision() != rev }, 10*time.Second, 20*time.Millisecond)
		require.Contains(t, available(), "new_tool")
	}
	require.True(t, found, "docs/deploying.md has no policycheck container")
}
