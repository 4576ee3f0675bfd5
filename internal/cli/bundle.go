package cli

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/bundle"
	oloader "github.com/open-policy-agent/opa/v1/loader"
	"github.com/open-policy-agent/opa/v1/storage"
	"github.com/spf13/cobra"

	"github.com/policycheck/policycheck/internal/ground/regoutil"
)

// bundleFlags are the flags of `bundle build`.
type bundleFlags struct {
	output     string
	revision   string
	signingKey string
	signingAlg string
	claimsFile string
	algGiven   bool // --signing-alg was on the command line
}

func newBundleCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bundle build",
		Short: "Build an OPA bundle of operator policies and data for serve --config",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return badInput(fmt.Errorf("bundle needs a subcommand: build\n%s", usageHint(cmd)))
		},
	}
	cmd.AddCommand(newBundleBuildCmd())
	return cmd
}

func newBundleBuildCmd() *cobra.Command {
	f := bundleFlags{}
	cmd := &cobra.Command{
		Use:   "build PATH... [--output FILE] [--revision REV] [--signing-key FILE [--signing-alg ALG] [--claims-file FILE]]",
		Short: "Build an OPA bundle (.tar.gz) of the policies and data under PATH, with its roots and revision",
		Long: `build writes the Rego (*_test.rego files left out) and data (data.json, data.yaml, placed by directory as
opa eval -d places them) under each PATH into an OPA bundle that serve --config downloads. It compiles the
policies with the shipped ones first: one that does not parse or compile is refused with file:row:col.

The manifest's roots are the packages of the policies and the top-level keys of the data, so that the bundle
owns exactly what it carries: the shipped policies (policycheck.availability, policycheck.lib*) stay in
place and the bundle may call them, and bundles of separate packages (filters in one, rules in another)
activate side by side. A package or data key that would own the shipped policies or data.policycheck (the
registry) is refused. The revision is --revision, or else the first 12 hex digits of the SHA-256 of the
bundle's policies and data: a build of the same files has the same revision.

--signing-key signs the bundle as opa build --signing-key does (a .signatures.json file): a PEM private key
(RSA for RS* and PS*, ECDSA on the matching curve for ES*) or, for HS*, a file holding the shared secret.
serve verifies it with OPA's keys configuration (docs/scaling.md, "Building and signing the bundle").` +
			exitCodes("0  the bundle was written", exitLineBad+", a key that cannot sign with --signing-alg"),
		Example: `  policycheck bundle build operator/ --revision 2024-06-01.1 --signing-key bundle-key.pem --output policycheck.tar.gz`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return badInput(fmt.Errorf("bundle build needs a PATH of policies\n%s", usageHint(cmd)))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			f.algGiven = cmd.Flags().Changed("signing-alg")
			b, err := buildBundle(args, f)
			if err != nil {
				return err
			}
			var buf bytes.Buffer
			if err := bundle.NewWriter(&buf).Write(*b); err != nil {
				return fmt.Errorf("writing the bundle: %w", err)
			}
			if err := os.WriteFile(f.output, buf.Bytes(), 0o644); err != nil {
				return badInput(fmt.Errorf("--output: %w", err))
			}
			signed := "unsigned"
			if f.signingKey != "" {
				signed = "signed " + f.signingAlg
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s: revision %s, roots %s, %d policies, %s\n",
				f.output, b.Manifest.Revision, strings.Join(*b.Manifest.Roots, " "), len(b.Modules), signed)
			return err
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&f.output, "output", "o", "bundle.tar.gz", "the bundle file to write")
	fl.StringVar(&f.revision, "revision", "", "the manifest's revision (default: a digest of the policies and data)")
	fl.StringVar(&f.signingKey, "signing-key", "", "sign the bundle with this key file (PEM private key; for HS*, the secret)")
	fl.StringVar(&f.signingAlg, "signing-alg", "RS256", "the signing algorithm: RS256|RS384|RS512|PS256|PS384|PS512|ES256|ES384|ES512|HS256|HS384|HS512")
	fl.StringVar(&f.claimsFile, "claims-file", "", "a JSON object of claims for the signature (say {\"scope\": \"write\"}) in place of the keyid claim")
	return cmd
}

// buildBundle loads, checks and (with a signing key) signs the bundle of
// paths.
func buildBundle(paths []string, f bundleFlags) (*bundle.Bundle, error) {
	signing := f.signingKey != ""
	if !signing && (f.claimsFile != "" || f.algGiven) {
		return nil, badInput(errors.New("--signing-alg and --claims-file need --signing-key"))
	}
	var sc *bundle.SigningConfig
	if signing {
		var err error
		if sc, err = signingConfig(f); err != nil {
			return nil, badInput(err)
		}
	}
	b := &bundle.Bundle{Data: map[string]any{}}
	seen := map[string]string{}
	for _, p := range paths {
		if _, err := os.Stat(p); err != nil {
			return nil, badInput(err)
		}
		res, err := oloader.NewFileLoader().WithRegoVersion(ast.RegoV1).WithProcessAnnotation(true).
			Filtered([]string{p}, func(_ string, info os.FileInfo, _ int) bool {
				return !info.IsDir() && isTestFile(info.Name())
			})
		if err != nil {
			return nil, badInput(err)
		}
		mods := make([]*oloader.RegoFile, 0, len(res.Modules))
		for _, m := range res.Modules {
			mods = append(mods, m)
		}
		sort.Slice(mods, func(i, j int) bool { return mods[i].Name < mods[j].Name })
		for _, m := range mods {
			name := m.Name // as found under p (the map's keys are cleaned of a leading /)
			rel, err := filepath.Rel(p, name)
			if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
				rel = filepath.Base(name)
			}
			bp := "/" + filepath.ToSlash(rel)
			if other, ok := seen[bp]; ok {
				return nil, badInput(fmt.Errorf("%s and %s would both be %s in the bundle", other, name, bp))
			}
			seen[bp] = name
			b.Modules = append(b.Modules, bundle.ModuleFile{URL: bp, Path: bp, Raw: m.Raw, Parsed: m.Parsed})
		}
		if err := mergeData(b.Data, res.Documents, p); err != nil {
			return nil, badInput(err)
		}
	}
	if len(b.Modules) == 0 {
		return nil, badInput(fmt.Errorf("%s: no Rego policies (*_test.rego files are left out)", strings.Join(paths, ", ")))
	}
	if err := compileBundle(b, seen); err != nil {
		return nil, badInput(err)
	}
	roots, err := bundleRoots(b, seen)
	if err != nil {
		return nil, badInput(err)
	}
	b.Manifest.Roots = &roots
	b.Manifest.Revision = f.revision
	if b.Manifest.Revision == "" {
		if b.Manifest.Revision, err = contentRevision(b); err != nil {
			return nil, err
		}
	}
	if sc != nil {
		if err := b.GenerateSignature(sc, "", false); err != nil {
			return nil, badInput(fmt.Errorf("--signing-key %s: %w", f.signingKey, err))
		}
	}
	return b, nil
}

// signingConfig reads and checks the signing key and claims of f: the key
// must be one that --signing-alg signs with.
func signingConfig(f bundleFlags) (*bundle.SigningConfig, error) {
	raw, err := os.ReadFile(f.signingKey)
	if err != nil {
		return nil, fmt.Errorf("--signing-key: %w", err)
	}
	alg := f.signingAlg
	isPEM := bytes.HasPrefix(bytes.TrimSpace(raw), []byte("-----BEGIN"))
	switch alg {
	case "HS256", "HS384", "HS512":
		if isPEM {
			return nil, fmt.Errorf("--signing-key %s: a PEM key, and %s signs with a shared secret (use RS256, PS256 or ES256 for a key pair)", f.signingKey, alg)
		}
		if len(bytes.TrimSpace(raw)) == 0 {
			return nil, fmt.Errorf("--signing-key %s: the secret is empty", f.signingKey)
		}
	case "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512":
		if err := checkPrivateKey(raw, alg); err != nil {
			return nil, fmt.Errorf("--signing-key %s: %w", f.signingKey, err)
		}
	default:
		return nil, fmt.Errorf("--signing-alg %q: not one of RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, ES512, HS256, HS384, HS512", alg)
	}
	if f.claimsFile != "" {
		craw, err := os.ReadFile(f.claimsFile)
		if err != nil {
			return nil, fmt.Errorf("--claims-file: %w", err)
		}
		var claims map[string]any
		if err := json.Unmarshal(craw, &claims); err != nil || claims == nil {
			return nil, fmt.Errorf("--claims-file %s: not a JSON object", f.claimsFile)
		}
	}
	// The key's text, not its file name: OPA reads a name that is not a
	// file as the key itself.
	return bundle.NewSigningConfig(string(raw), alg, f.claimsFile), nil
}

// checkPrivateKey reports why raw is not a PEM private key that alg signs
// with.
func checkPrivateKey(raw []byte, alg string) error {
	block, _ := pem.Decode(raw)
	if block == nil {
		return errors.New("not a PEM key")
	}
	var key any
	var err error
	switch block.Type {
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	case "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	default:
		return fmt.Errorf("a PEM %q, not a private key", block.Type)
	}
	if err != nil {
		return err
	}
	switch k := key.(type) {
	case *rsa.PrivateKey:
		if alg[0] == 'R' || alg[0] == 'P' {
			return nil
		}
	case *ecdsa.PrivateKey:
		want := map[string]elliptic.Curve{"ES256": elliptic.P256(), "ES384": elliptic.P384(), "ES512": elliptic.P521()}[alg]
		if want != nil && k.Curve == want {
			return nil
		}
		if want != nil {
			return fmt.Errorf("an ECDSA key on %s, and %s needs %s", k.Curve.Params().Name, alg, want.Params().Name)
		}
	}
	return fmt.Errorf("a %T cannot sign %s", key, alg)
}

// mergeData adds doc (the data loaded from path) to data, refusing a value
// that two paths both set.
func mergeData(data, doc map[string]any, path string) error {
	for k, v := range doc {
		old, ok := data[k]
		if !ok {
			data[k] = v
			continue
		}
		om, ok1 := old.(map[string]any)
		nm, ok2 := v.(map[string]any)
		if !ok1 || !ok2 {
			return fmt.Errorf("%s: data.%s is set by an earlier PATH too", path, k)
		}
		if err := mergeData(om, nm, path); err != nil {
			return err
		}
	}
	return nil
}

// compileBundle compiles the bundle's modules with the shipped policies, as
// the sidecar's OPA bundle plugin does; errors name the files.
func compileBundle(b *bundle.Bundle, files map[string]string) error {
	shipped, err := regoutil.ShippedModules()
	if err != nil {
		return err
	}
	mods := map[string]*ast.Module{}
	for _, sm := range shipped {
		mods[sm.File] = sm.Module
	}
	for _, m := range b.Modules {
		mods[files[m.Path]] = m.Parsed
	}
	c := ast.NewCompiler().WithDefaultRegoVersion(ast.RegoV1)
	if c.Compile(mods); c.Failed() {
		return c.Errors
	}
	return nil
}

// bundleRoots returns the manifest roots of b: each module's package and
// each top-level data key, without those another root covers. A root that
// would cover a shipped policy or the registry's data.policycheck is
// refused: OPA erases what is under a bundle's roots when it activates it.
func bundleRoots(b *bundle.Bundle, files map[string]string) ([]string, error) {
	shipped, err := regoutil.ShippedModules()
	if err != nil {
		return nil, err
	}
	owner := map[string]string{}
	for _, m := range b.Modules {
		p, err := storage.NewPathForRef(m.Parsed.Package.Path)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", files[m.Path], err)
		}
		root := strings.Join(p, "/")
		if _, ok := owner[root]; !ok {
			owner[root] = files[m.Path] + ": package " + strings.TrimPrefix(m.Parsed.Package.Path.String(), "data.")
		}
	}
	for k := range b.Data {
		if _, ok := owner[k]; !ok {
			owner[k] = "data." + k
		}
	}
	var roots []string
	for root, who := range owner {
		if root == "policycheck" || root == "system" && who == "data.system" {
			return nil, fmt.Errorf("%s: data.%s is the engine's or OPA's, not a bundle's", who, root)
		}
		for _, sm := range shipped {
			p, _ := storage.NewPathForRef(sm.Module.Package.Path)
			if under(strings.Join(p, "/"), root) {
				return nil, fmt.Errorf("%s: the shipped policies own %s; a bundle may call them, not replace them",
					who, strings.TrimPrefix(sm.Module.Package.Path.String(), "data."))
			}
		}
		roots = append(roots, root)
	}
	sort.Strings(roots)
	var out []string
next:
	for _, r := range roots {
		for _, kept := range out {
			if under(r, kept) {
				continue next
			}
		}
		out = append(out, r)
	}
	return out, nil
}

// under reports whether slash path p is root or below it.
func under(p, root string) bool { return p == root || strings.HasPrefix(p, root+"/") }

// contentRevision is the default revision: a digest of b's policies and
// data.
func contentRevision(b *bundle.Bundle) (string, error) {
	h := sha256.New()
	for _, m := range b.Modules {
		fmt.Fprintf(h, "%s\x00%d\x00", m.Path, len(m.Raw))
		h.Write(m.Raw)
	}
	data, err := json.Marshal(b.Data)
	if err != nil {
		return "", fmt.Errorf("the bundle's data: %w", err)
	}
	h.Write(data)
	return hex.EncodeToString(h.Sum(nil))[:12], nil
}
