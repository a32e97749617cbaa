package informers

import (
	"bytes"
	"fmt"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

// protoListOfConfigMaps encodes, as kube-apiserver sends it, a list of n
// ConfigMaps in namespaces ns-0 and ns-1, with uids uid-<i>, data and
// labels, and a list's metadata of a paged list.
func protoListOfConfigMaps(t *testing.T, n int) (*corev1.ConfigMapList, []byte) {
	t.Helper()
	remaining := int64(3)
	l := &corev1.ConfigMapList{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMapList"},
		ListMeta: metav1.ListMeta{ResourceVersion: "42", Continue: "next", RemainingItemCount: &remaining},
	}
	for i := range n {
		l.Items = append(l.Items, corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprint("ns-", i%2), Name: fmt.Sprint("cm-", i), UID: types.UID(fmt.Sprint("uid-", i)),
				ResourceVersion: fmt.Sprint(10 + i), Labels: map[string]string{"i": fmt.Sprint(i)}},
			Data: map[string]string{"data": fmt.Sprint("value ", i)},
		})
	}
	var buf bytes.Buffer
	if err := protobuf.NewSerializer(clientgoscheme.Scheme, clientgoscheme.Scheme).Encode(l, &buf); err != nil {
		t.Fatal(err)
	}
	return l, buf.Bytes()
}

func TestDecodeListKeepingDecodesTheItemsKept(t *testing.T) {
	want, data := protoListOfConfigMaps(t, 6)
	var asked []string
	got := &corev1.ConfigMapList{}
	ok, err := decodeListKeeping(data, got, func(namespace, uid string) bool {
		asked = append(asked, namespace+"/"+uid)
		return namespace == "ns-1" || uid == "uid-0"
	})
	if !ok || err != nil {
		t.Fatalf("decodeListKeeping: %v, %v; want a list decoded", ok, err)
	}
	if fmt.Sprint(asked) != "[ns-0/uid-0 ns-1/uid-1 ns-0/uid-2 ns-1/uid-3 ns-0/uid-4 ns-1/uid-5]" {
		t.Errorf("keep was asked about %v, want every item once, in order", asked)
	}
	// As the standard decoder decodes it, but for the items not kept.
	std := &corev1.ConfigMapList{}
	if _, _, err := protobuf.NewSerializer(clientgoscheme.Scheme, clientgoscheme.Scheme).Decode(data, nil, std); err != nil {
		t.Fatal(err)
	}
	std.TypeMeta = metav1.TypeMeta{}
	std.Items = []corev1.ConfigMap{std.Items[0], std.Items[1], std.Items[3], std.Items[5]}
	if !reflect.DeepEqual(got, std) {
		t.Errorf("decoded %+v\nwant %+v", got, std)
	}
	if got.ResourceVersion != want.ResourceVersion || got.Continue != "next" || got.RemainingItemCount == nil || *got.RemainingItemCount != 3 {
		t.Errorf("list metadata %+v, want the list's", got.ListMeta)
	}
	if len(got.Items) != 4 || got.Items[1].Data["data"] != "value 1" || got.Items[1].Labels["i"] != "1" {
		t.Errorf("items %+v, want uid-0, uid-1, uid-3 and uid-5 whole", got.Items)
	}
}

func TestDecodeListKeepingLeavesOtherEncodingsAndTypes(t *testing.T) {
	keepAll := func(string, string) bool { return true }
	_, proto := protoListOfConfigMaps(t, 2)
	var js bytes.Buffer
	list, _ := protoListOfConfigMaps(t, 2)
	if err := json.NewSerializerWithOptions(json.DefaultMetaFactory, nil, nil, json.SerializerOptions{}).Encode(list, &js); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		data []byte
		into kruntime.Object
	}{
		{"JSON", js.Bytes(), &corev1.ConfigMapList{}},
		{"a truncated protobuf list", proto[:len(proto)-5], &corev1.ConfigMapList{}},
		{"an unstructured list", proto, &unstructured.UnstructuredList{}},
		{"a list of another shape", proto, &metav1.List{}},
	} {
		before, into := tc.into.DeepCopyObject(), tc.into.DeepCopyObject()
		ok, err := decodeListKeeping(tc.data, into, keepAll)
		if ok || err != nil {
			t.Errorf("%s: decodeListKeeping = %v, %v; want it left to the standard decoder", tc.name, ok, err)
		}
		if !reflect.DeepEqual(into, before) {
			t.Errorf("%s: the list was changed: %+v", tc.name, into)
		}
	}
}
