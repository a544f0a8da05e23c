package volumes

import (
	"errors"
	"fmt"
	"os"

	corev1 "k8s.io/api/core/v1"
)

// file is one file of a ConfigMap, Secret, downwardAPI or projected
// volume.
type file struct {
	data []byte
	mode os.FileMode
	// group owns the file when set (the pod's fsGroup); else the agent's.
	group *int64
}

// payload is the files of such a volume by their path in it.
type payload map[string]file

// defaultFileMode is the mode of a volume's files when neither the item
// nor the volume gives one, as in Kubernetes.
const defaultFileMode int32 = 0o644

// modeOf is mode, or def if mode is nil, checked to be permission bits.
func modeOf(mode *int32, def int32) (int32, error) {
	if mode == nil {
		return def, nil
	}
	if *mode < 0 || *mode > 0o777 {
		return 0, fmt.Errorf("mode %#o is not between 0 and 0777", *mode)
	}
	return *mode, nil
}

func configMapVolume(f *fetcher, src *corev1.ConfigMapVolumeSource) (payload, error) {
	mode, err := modeOf(src.DefaultMode, defaultFileMode)
	if err != nil {
		return nil, fmt.Errorf("defaultMode: %w", err)
	}
	p := payload{}
	return p, addConfigMap(f, p, src.Name, src.Items, mode, src.Optional)
}

func secretVolume(f *fetcher, src *corev1.SecretVolumeSource) (payload, error) {
	mode, err := modeOf(src.DefaultMode, defaultFileMode)
	if err != nil {
		return nil, fmt.Errorf("defaultMode: %w", err)
	}
	p := payload{}
	return p, addSecret(f, p, src.SecretName, src.Items, mode, src.Optional)
}

// addConfigMap adds the keys of a ConfigMap, data and binaryData.
func addConfigMap(f *fetcher, p payload, name string, items []corev1.KeyToPath, mode int32, optional *bool) error {
	cm, err := f.configMap(name)
	if skipOptional(err, optional) {
		return nil
	}
	if err != nil {
		return err
	}
	data := make(map[string][]byte, len(cm.Data)+len(cm.BinaryData))
	for k, v := range cm.Data {
		data[k] = []byte(v)
	}
	for k, v := range cm.BinaryData {
		data[k] = v
	}
	return addKeys(p, fmt.Sprintf("configmap %q", name), data, items, mode, optional)
}

// addSecret adds the keys of a Secret.
func addSecret(f *fetcher, p payload, name string, items []corev1.KeyToPath, mode int32, optional *bool) error {
	s, err := f.secret(name)
	if skipOptional(err, optional) {
		return nil
	}
	if err != nil {
		return err
	}
	return addKeys(p, fmt.Sprintf("secret %q", name), s.Data, items, mode, optional)
}

// addKeys adds every key under its name, or, if items are given, those
// keys under their paths. A missing item key is an error unless the source
// is optional.
func addKeys(p payload, what string, data map[string][]byte, items []corev1.KeyToPath, mode int32, optional *bool) error {
	if len(items) == 0 {
		for k, v := range data {
			p[k] = file{data: v, mode: os.FileMode(mode)}
		}
		return nil
	}
	for _, it := range items {
		v, ok := data[it.Key]
		if !ok {
			if optional != nil && *optional {
				continue
			}
			return fmt.Errorf("%s has no key %q", what, it.Key)
		}
		m, err := modeOf(it.Mode, mode)
		if err != nil {
			return fmt.Errorf("%s: item %q: %w", what, it.Key, err)
		}
		p[it.Path] = file{data: v, mode: os.FileMode(m)}
	}
	return nil
}

func (m *Manager) downwardAPIVolume(pod *corev1.Pod, items []corev1.DownwardAPIVolumeFile, defaultMode *int32) (payload, error) {
	mode, err := modeOf(defaultMode, defaultFileMode)
	if err != nil {
		return nil, fmt.Errorf("defaultMode: %w", err)
	}
	p := payload{}
	return p, m.addDownwardAPI(p, pod, items, mode)
}

// addDownwardAPI adds the files of downward API items: pod metadata, or
// a named container's resources.
func (m *Manager) addDownwardAPI(p payload, pod *corev1.Pod, items []corev1.DownwardAPIVolumeFile, mode int32) error {
	for _, it := range items {
		var (
			v   string
			err error
		)
		switch {
		case it.FieldRef != nil && it.ResourceFieldRef != nil:
			err = errors.New("both fieldRef and resourceFieldRef are set")
		case it.FieldRef != nil:
			v, err = podField(pod, it.FieldRef, true)
		case it.ResourceFieldRef != nil:
			name := it.ResourceFieldRef.ContainerName
			c := findContainer(pod, name)
			if c == nil {
				err = fmt.Errorf("resourceFieldRef: no container %q in the pod", name)
				break
			}
			v, err = containerResource(pod, c, it.ResourceFieldRef, m.cfg.Allocatable)
		default:
			err = errors.New("neither fieldRef nor resourceFieldRef is set")
		}
		if err != nil {
			return fmt.Errorf("downwardAPI item %q: %w", it.Path, err)
		}
		fm, err := modeOf(it.Mode, mode)
		if err != nil {
			return fmt.Errorf("downwardAPI item %q: %w", it.Path, err)
		}
		p[it.Path] = file{data: []byte(v), mode: os.FileMode(fm)}
	}
	return nil
}

// projectedVolume gathers the files of a projected volume's sources; a
// later source's file replaces an earlier one's at the same path.
func (m *Manager) projectedVolume(f *fetcher, pod *corev1.Pod, v *corev1.Volume) (payload, error) {
	mode, err := modeOf(v.Projected.DefaultMode, defaultFileMode)
	if err != nil {
		return nil, fmt.Errorf("defaultMode: %w", err)
	}
	p := payload{}
	for i, s := range v.Projected.Sources {
		var err error
		switch {
		case s.ConfigMap != nil:
			err = addConfigMap(f, p, s.ConfigMap.Name, s.ConfigMap.Items, mode, s.ConfigMap.Optional)
		case s.Secret != nil:
			err = addSecret(f, p, s.Secret.Name, s.Secret.Items, mode, s.Secret.Optional)
		case s.DownwardAPI != nil:
			err = m.addDownwardAPI(p, pod, s.DownwardAPI.Items, mode)
		case s.ServiceAccountToken != nil:
			var tok string
			if tok, err = m.token(f.ctx, pod, s.ServiceAccountToken); err == nil {
				p[s.ServiceAccountToken.Path] = file{data: []byte(tok), mode: os.FileMode(mode)}
			}
		case s.ClusterTrustBundle != nil:
			// Optional bundles that cannot be found are left out, and isle
			// finds none.
			if o := s.ClusterTrustBundle.Optional; o == nil || !*o {
				err = errors.New("projected clusterTrustBundle is not supported by isle")
			}
		case s.PodCertificate != nil:
			err = errors.New("projected podCertificate is not supported by isle")
		default:
			err = errors.New("no source is set")
		}
		if err != nil {
			return nil, fmt.Errorf("projected sources[%d]: %w", i, err)
		}
	}
	return p, nil
}
