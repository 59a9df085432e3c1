// kube_decode reads the manifest `rpcmeter kube` prints (multi-document YAML, or JSON) on
// standard input and decodes every object strictly into the Kubernetes API types: an unknown
// or duplicated field, a wrong type or a malformed quantity fails, as `kubectl apply
// --validate=strict` would. It also checks what the API server would refuse on names and
// ConfigMap keys (apimachinery's own validators). It prints one line per object and exits 1
// on the first problem. Used by tests/kube.rs.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "kube_decode: "+format+"\n", args...)
	os.Exit(1)
}

func errs(what string, list []string) {
	if len(list) > 0 {
		fail("%s: %s", what, strings.Join(list, "; "))
	}
}

// With -json, each object is printed again as one line of JSON, as the API types hold it
// (so a test can compare what YAML carried with what it meant to say).
var printJSON = len(os.Args) > 1 && os.Args[1] == "-json"

func strict(doc []byte, into any) {
	if err := yaml.UnmarshalStrict(doc, into); err != nil {
		fail("%v\n%s", err, doc)
	}
	if _, isList := into.(*metav1.List); printJSON && !isList {
		line, err := json.Marshal(into)
		if err != nil {
			fail("%v", err)
		}
		fmt.Printf("%s\n", line)
	}
}

func name(kind string, meta metav1.ObjectMeta) {
	errs(kind+" name "+meta.Name, validation.IsDNS1123Subdomain(meta.Name))
	for k, v := range meta.Labels {
		errs("label "+k, validation.IsQualifiedName(k))
		errs("label value "+v, validation.IsValidLabelValue(v))
	}
}

func object(doc []byte) {
	var head metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &head); err != nil {
		fail("%v", err)
	}
	switch head.APIVersion + " " + head.Kind {
	case "v1 List":
		var list metav1.List
		strict(doc, &list)
		for _, item := range list.Items {
			object(item.Raw)
		}
	case "v1 ConfigMap":
		var cm corev1.ConfigMap
		strict(doc, &cm)
		name("ConfigMap", cm.ObjectMeta)
		size := 0
		for k, v := range cm.Data {
			errs("ConfigMap key "+k, validation.IsConfigMapKey(k))
			size += len(v)
		}
		for k, v := range cm.BinaryData {
			errs("ConfigMap key "+k, validation.IsConfigMapKey(k))
			size += len(v)
		}
		if size > 1<<20 {
			fail("ConfigMap %s holds %d bytes, over 1 MiB", cm.Name, size)
		}
		say("ConfigMap %s %d keys\n", cm.Name, len(cm.Data)+len(cm.BinaryData))
	case "v1 Secret":
		var s corev1.Secret
		strict(doc, &s)
		name("Secret", s.ObjectMeta)
		for k := range s.StringData {
			errs("Secret key "+k, validation.IsConfigMapKey(k))
		}
		for k := range s.Data {
			errs("Secret key "+k, validation.IsConfigMapKey(k))
		}
		say("Secret %s %d keys\n", s.Name, len(s.Data)+len(s.StringData))
	case "v1 Service":
		var s corev1.Service
		strict(doc, &s)
		name("Service", s.ObjectMeta)
		errs("Service name "+s.Name, validation.IsDNS1035Label(s.Name))
		say("Service %s\n", s.Name)
	case "batch/v1 Job":
		var job batchv1.Job
		strict(doc, &job)
		name("Job", job.ObjectMeta)
		errs("Job name "+job.Name, validation.IsDNS1123Label(job.Name))
		pod := job.Spec.Template.Spec
		for _, v := range pod.Volumes {
			var items []corev1.KeyToPath
			if v.ConfigMap != nil {
				items = v.ConfigMap.Items
			}
			if v.Secret != nil {
				items = v.Secret.Items
			}
			for _, it := range items {
				if strings.HasPrefix(it.Path, "/") || strings.Contains(it.Path, "..") {
					fail("volume %s: item path %q", v.Name, it.Path)
				}
			}
		}
		for _, c := range pod.Containers {
			if c.Resources.Limits.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
				fail("container %s has no resources", c.Name)
			}
		}
		say("Job %s completions=%d parallelism=%d\n", job.Name, *job.Spec.Completions, *job.Spec.Parallelism)
	default:
		fail("unexpected object %q %q", head.APIVersion, head.Kind)
	}
}

// One line per object, unless -json prints the objects themselves.
func say(format string, args ...any) {
	if !printJSON {
		fmt.Printf(format, args...)
	}
}

func main() {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(os.Stdin))
	n := 0
	for {
		doc, err := reader.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			fail("%v", err)
		}
		if len(bytes.TrimSpace(doc)) == 0 || string(bytes.TrimSpace(doc)) == "---" {
			continue
		}
		object(doc)
		n++
	}
	if n == 0 {
		fail("no object")
	}
}
