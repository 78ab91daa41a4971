package admission

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"sync/atomic"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
)

// Path is where the webhook answers.
const Path = "/admission"

// Options configure the webhook server.
type Options struct {
	// Addr is the HTTPS bind address, such as ":9443".
	Addr string
	// Namespace is the agent's: the Service and the certificate's Secret
	// live there.
	Namespace string
	// URL, when set, is what the API server calls (clientConfig.url), such
	// as https://127.0.0.1:9443/admission for an agent outside the cluster.
	// Empty: the Service named Service in Namespace, port 443, Path.
	URL     string
	Service string
	// Client reads and writes the certificate's Secret (uncached) and the
	// ValidatingWebhookConfiguration.
	Client client.Client
	// Handler answers the requests.
	Handler *Handler
	// Validity is the life of a certificate; it is renewed in its last
	// third. CheckEvery is how often that is checked (and another
	// replica's renewal picked up).
	Validity   time.Duration
	CheckEvery time.Duration
	// TimeoutSeconds is the API server's wait for an answer.
	TimeoutSeconds int32
}

// DefaultOptions returns the defaults of the agent's flags.
func DefaultOptions() Options {
	return Options{Addr: ":9443", Service: "driftless-admission", Validity: 90 * 24 * time.Hour, CheckEvery: time.Hour, TimeoutSeconds: 2}
}

// Server serves the webhook on every agent replica (it needs no leader)
// and keeps its certificate and registration current.
type Server struct {
	opts  Options
	hosts []string
	cert  atomic.Pointer[servingCert]
	// holdKey stamps holds (Stamper, VerifyHold); kept in the Secret of
	// the certificate, so every replica has the same.
	holdKey atomic.Pointer[[]byte]
}

// VerifyHold reports whether h, the hold of the Sync namespace/name,
// carries a stamp of this agent's webhook, so that h.By is the user the
// API server saw write it.
func (s *Server) VerifyHold(namespace, name string, h v1alpha1.Hold) bool {
	return v1alpha1.VerifyHoldStamp(s.key(), namespace, name, h)
}

// key is the key that stamps holds, nil before the first refresh.
func (s *Server) key() []byte {
	if k := s.holdKey.Load(); k != nil {
		return *k
	}
	return nil
}

// New checks the options.
func New(o Options) (*Server, error) {
	s := &Server{opts: o}
	if o.URL != "" {
		u, err := url.Parse(o.URL)
		if err != nil || u.Scheme != "https" || u.Hostname() == "" {
			return nil, fmt.Errorf("--admission-webhook-url %q: write the https:// URL the API server should call, such as https://127.0.0.1:9443%s", o.URL, Path)
		}
		s.hosts = []string{u.Hostname()}
	} else {
		s.hosts = []string{o.Service + "." + o.Namespace + ".svc", o.Service + "." + o.Namespace + ".svc.cluster.local"}
	}
	if o.Validity <= 0 || o.CheckEvery <= 0 {
		return nil, errors.New("admission webhook: certificate validity and check interval must be positive")
	}
	return s, nil
}

// ConfigurationName is the name of the ValidatingWebhookConfiguration of
// the agent in namespace.
func ConfigurationName(namespace string) string { return "driftless-admission-" + namespace }

// SecretName is the name of the Secret holding the serving certificate.
const SecretName = "driftless-admission-tls"

// NeedLeaderElection is false: every replica answers the API server.
func (s *Server) NeedLeaderElection() bool { return false }

// Start gets a certificate, serves, registers the webhook and renews the
// certificate until ctx is done.
func (s *Server) Start(ctx context.Context) error {
	log := ctrl.Log.WithName("admission")
	if err := s.refresh(ctx); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", s.opts.Addr)
	if err != nil {
		return fmt.Errorf("admission webhook: listen on %s: %w", s.opts.Addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle(Path, s.opts.Handler)
	mux.Handle(MutatePath, &Stamper{Key: s.key})
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 5 * time.Second,
		TLSConfig: &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return &s.cert.Load().tls, nil
		}},
	}
	served := make(chan error, 1)
	go func() { served <- srv.ServeTLS(ln, "", "") }()
	if err := s.register(ctx); err != nil {
		_ = srv.Close()
		return err
	}
	log.Info("admission webhook serving", "address", ln.Addr().String(), "configuration", ConfigurationName(s.opts.Namespace))
	tick := time.NewTicker(s.opts.CheckEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			return srv.Shutdown(shut)
		case err := <-served:
			return fmt.Errorf("admission webhook: %w", err)
		case <-tick.C:
			before := s.cert.Load()
			if err := s.refresh(ctx); err != nil {
				log.Error(err, "renew the admission webhook's certificate")
				continue
			}
			if s.cert.Load() != before {
				if err := s.register(ctx); err != nil {
					log.Error(err, "register the admission webhook's new CA")
				}
			}
		}
	}
}

// refresh loads the certificate from its Secret, issuing and storing a
// new one when there is none or it is due for renewal. Replicas that race
// to renew settle on the Secret's resourceVersion: the loser reloads.
func (s *Server) refresh(ctx context.Context) error {
	key := client.ObjectKey{Namespace: s.opts.Namespace, Name: SecretName}
	for attempt := 0; attempt < 3; attempt++ {
		var sec corev1.Secret
		err := s.opts.Client.Get(ctx, key, &sec)
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("read the admission webhook's certificate, Secret %s/%s: %w", key.Namespace, key.Name, err)
		}
		found := err == nil
		holdKey := sec.Data[holdKeyEntry]
		var valid *servingCert
		if found {
			if c, err := load(sec.Data[certKey], sec.Data[keyKey], sec.Data[caKey]); err == nil && !needsRenewal(c.leaf, s.hosts, time.Now()) {
				valid = c
			}
		}
		if valid != nil && len(holdKey) > 0 {
			if cur := s.cert.Load(); cur == nil || !cur.leaf.Equal(valid.leaf) || !bytes.Equal(cur.caBundle, valid.caBundle) {
				s.cert.Store(valid)
			}
			s.holdKey.Store(&holdKey)
			return nil
		}
		certPEM, keyPEM, bundle := sec.Data[certKey], sec.Data[keyKey], sec.Data[caKey]
		if valid == nil {
			if certPEM, keyPEM, bundle, err = issue(s.hosts, s.opts.Validity, time.Now(), sec.Data[caKey]); err != nil {
				return err
			}
		}
		if len(holdKey) == 0 {
			// Kept across renewals: a hold stamped before one still
			// checks out after it.
			holdKey = make([]byte, 32)
			if _, err := rand.Read(holdKey); err != nil {
				return fmt.Errorf("make the key that stamps holds: %w", err)
			}
		}
		sec.Type = corev1.SecretTypeTLS
		sec.Data = map[string][]byte{certKey: certPEM, keyKey: keyPEM, caKey: bundle, holdKeyEntry: holdKey}
		if found {
			err = s.opts.Client.Update(ctx, &sec)
		} else {
			sec.ObjectMeta = metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace, Labels: map[string]string{"app.kubernetes.io/name": "driftless"}}
			err = s.opts.Client.Create(ctx, &sec)
		}
		if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
			continue // another replica renewed it: load theirs
		}
		if err != nil {
			return fmt.Errorf("store the admission webhook's certificate in Secret %s/%s: %w", key.Namespace, key.Name, err)
		}
		c, err := load(certPEM, keyPEM, bundle)
		if err != nil {
			return err
		}
		s.cert.Store(c)
		s.holdKey.Store(&holdKey)
		return nil
	}
	return fmt.Errorf("store the admission webhook's certificate in Secret %s/%s: it kept changing under us", key.Namespace, key.Name)
}

// register applies the ValidatingWebhookConfiguration and the
// MutatingWebhookConfiguration with the current CA bundle.
func (s *Server) register(ctx context.Context) error {
	bundle := s.cert.Load().caBundle
	for _, cfg := range []client.Object{Configuration(s.opts, bundle), MutatingConfiguration(s.opts, bundle)} {
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(cfg)
		if err != nil {
			return err
		}
		if md, ok := u["metadata"].(map[string]any); ok {
			delete(md, "creationTimestamp")
		}
		obj := &unstructured.Unstructured{Object: u}
		err = s.opts.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner("driftless-agent"), client.ForceOwnership)
		if err != nil {
			return fmt.Errorf("register the admission webhook, %s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
	}
	return nil
}

// MutatingConfiguration is the MutatingWebhookConfiguration of the
// options (named as Configuration): one webhook for creates and updates
// of Syncs, which stamps the holds they write (Stamper). It ignores
// failures: a hold written while the agent is down is applied, and named
// as claimed, not verified.
func MutatingConfiguration(o Options, caBundle []byte) *admissionregistrationv1.MutatingWebhookConfiguration {
	cc := clientConfig(o, caBundle, MutatePath)
	return &admissionregistrationv1.MutatingWebhookConfiguration{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "MutatingWebhookConfiguration"},
		ObjectMeta: metav1.ObjectMeta{Name: ConfigurationName(o.Namespace), Labels: map[string]string{"app.kubernetes.io/name": "driftless"}},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:         "holds.driftless.dev",
			ClientConfig: cc,
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{v1alpha1.GroupVersion.Group}, APIVersions: []string{"*"}, Resources: []string{"syncs"},
					Scope: ptr.To(admissionregistrationv1.NamespacedScope)},
			}},
			FailurePolicy:           ptr.To(admissionregistrationv1.Ignore),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			TimeoutSeconds:          ptr.To(o.TimeoutSeconds),
			AdmissionReviewVersions: []string{"v1"},
			MatchPolicy:             ptr.To(admissionregistrationv1.Equivalent),
			ReinvocationPolicy:      ptr.To(admissionregistrationv1.NeverReinvocationPolicy),
		}},
	}
}

// clientConfig is how the API server calls the webhook at path: o.URL
// with its path replaced, or the Service.
func clientConfig(o Options, caBundle []byte, path string) admissionregistrationv1.WebhookClientConfig {
	cc := admissionregistrationv1.WebhookClientConfig{CABundle: caBundle}
	if o.URL != "" {
		u, err := url.Parse(o.URL)
		if err == nil && u.Path == Path {
			u.Path = path
		}
		cc.URL = ptr.To(u.String())
	} else {
		cc.Service = &admissionregistrationv1.ServiceReference{Namespace: o.Namespace, Name: o.Service, Path: ptr.To(path), Port: ptr.To[int32](443)}
	}
	return cc
}

// Configuration is the ValidatingWebhookConfiguration of the options: a
// webhook for updates and deletes of objects labelled by a Sync, selected by the API
// server on the label, one for scale subresources (a Scale carries no
// labels, so the handler reads the scaled object's), and one for creates
// and updates of Syncs (DecideSync). All ignore failures:
// a stopped agent never blocks a write.
func Configuration(o Options, caBundle []byte) *admissionregistrationv1.ValidatingWebhookConfiguration {
	cc := clientConfig(o, caBundle, Path)
	hook := func(name string, resources []string, selector *metav1.LabelSelector, ops ...admissionregistrationv1.OperationType) admissionregistrationv1.ValidatingWebhook {
		return admissionregistrationv1.ValidatingWebhook{
			Name:         name,
			ClientConfig: cc,
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: ops,
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{"*"}, APIVersions: []string{"*"}, Resources: resources, Scope: ptr.To(admissionregistrationv1.AllScopes)},
			}},
			ObjectSelector:          selector,
			FailurePolicy:           ptr.To(admissionregistrationv1.Ignore),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			TimeoutSeconds:          ptr.To(o.TimeoutSeconds),
			AdmissionReviewVersions: []string{"v1"},
			MatchPolicy:             ptr.To(admissionregistrationv1.Equivalent),
		}
	}
	syncs := hook("syncs.driftless.dev", []string{"syncs"}, nil, admissionregistrationv1.Create, admissionregistrationv1.Update)
	syncs.Rules[0].APIGroups = []string{v1alpha1.GroupVersion.Group}
	managed := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: v1alpha1.SyncLabel, Operator: metav1.LabelSelectorOpExists}}}
	return &admissionregistrationv1.ValidatingWebhookConfiguration{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingWebhookConfiguration"},
		ObjectMeta: metav1.ObjectMeta{Name: ConfigurationName(o.Namespace), Labels: map[string]string{"app.kubernetes.io/name": "driftless"}},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{
			hook("managed.driftless.dev", []string{"*"}, managed, admissionregistrationv1.Update, admissionregistrationv1.Delete),
			hook("scale.driftless.dev", []string{"*/scale"}, nil, admissionregistrationv1.Update),
			syncs,
		},
	}
}
