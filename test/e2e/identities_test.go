package e2e_test

import (
	"bytes"
	"context"
	"os"
	"slices"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// serviceAccountToken creates the ServiceAccount ns/name and returns a token
// for it from the TokenRequest API, and the user name RBAC knows it by.
func serviceAccountToken(ctx context.Context, ns, name string) (token, user string) {
	GinkgoHelper()
	_, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	hour := int64(3600)
	tr, err := kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authnv1.TokenRequest{
		Spec: authnv1.TokenRequestSpec{ExpirationSeconds: &hour},
	}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred(), "request a token for ServiceAccount %s/%s", ns, name)
	Expect(tr.Status.Token).NotTo(BeEmpty())
	return tr.Status.Token, "system:serviceaccount:" + ns + ":" + name
}

// serviceAccount is the RBAC subject of the ServiceAccount ns/name.
func serviceAccount(ns, name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}
}

// userSubject is the RBAC subject of the user name.
func userSubject(name string) rbacv1.Subject {
	return rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: name}
}

// grantClusterRole creates the ClusterRole name with rules and binds it to
// subject. Cluster-wide names must be unique per spec: include the
// namespace in name.
func grantClusterRole(ctx context.Context, name string, rules []rbacv1.PolicyRule, subject rbacv1.Subject) {
	GinkgoHelper()
	_, err := kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	_, err = kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects:   []rbacv1.Subject{subject},
	}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
}

// grantRole creates the Role ns/name with rules and binds it to subject.
func grantRole(ctx context.Context, ns, name string, rules []rbacv1.PolicyRule, subject rbacv1.Subject) {
	GinkgoHelper()
	_, err := kube.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	_, err = kube.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects:   []rbacv1.Subject{subject},
	}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
}

// allowed returns a function reporting whether RBAC lets user (with the
// groups every service account or authenticated user has) do what attrs
// describe, for waiting until a grant has reached the API server's
// authorizer cache.
func allowed(ctx context.Context, user string, groups []string, res *authzv1.ResourceAttributes, nonRes *authzv1.NonResourceAttributes) func() (bool, error) {
	return func() (bool, error) {
		sar, err := kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authzv1.SubjectAccessReview{
			Spec: authzv1.SubjectAccessReviewSpec{User: user, Groups: slices.Concat(groups, []string{"system:authenticated"}), ResourceAttributes: res, NonResourceAttributes: nonRes},
		}, metav1.CreateOptions{})
		if err != nil {
			return false, err
		}
		return sar.Status.Allowed, nil
	}
}

// rbacManifest holds the rules of the Roles and ClusterRoles of a YAML file.
type rbacManifest struct {
	clusterRoles, roles map[string][]rbacv1.PolicyRule
}

// readRBAC reads the Roles and ClusterRoles of the multi-document YAML file
// at path; other kinds are skipped.
func readRBAC(path string) rbacManifest {
	GinkgoHelper()
	b, err := os.ReadFile(path)
	Expect(err).NotTo(HaveOccurred())
	m := rbacManifest{clusterRoles: map[string][]rbacv1.PolicyRule{}, roles: map[string][]rbacv1.PolicyRule{}}
	for _, doc := range bytes.Split(b, []byte("\n---\n")) {
		var head metav1.TypeMeta
		Expect(yaml.Unmarshal(doc, &head)).To(Succeed(), "%s: %s", path, doc)
		switch head.Kind {
		case "ClusterRole":
			var r rbacv1.ClusterRole
			Expect(yaml.UnmarshalStrict(doc, &r)).To(Succeed(), "%s: %s", path, doc)
			m.clusterRoles[r.Name] = r.Rules
		case "Role":
			var r rbacv1.Role
			Expect(yaml.UnmarshalStrict(doc, &r)).To(Succeed(), "%s: %s", path, doc)
			m.roles[r.Name] = r.Rules
		}
	}
	return m
}
