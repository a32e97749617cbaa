package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// File is one generated file.
type File struct {
	// Path is slash-separated and relative to the project root.
	Path string
	// Content is the whole file.
	Content []byte
	// Executable files get mode 0755, others 0644.
	Executable bool
	// CreateOnly files are written when missing and never again (go.mod,
	// which go mod tidy rewrites).
	CreateOnly bool
}

// Action is what happened to a file.
type Action string

// The actions, as printed.
const (
	ActionCreate    Action = "create"    // it did not exist
	ActionUpdate    Action = "update"    // unchanged since converge wrote it, and the template changed
	ActionUnchanged Action = "unchanged" // already holds exactly this
	ActionKeep      Action = "keep"      // changed by the user: left alone
	ActionOverwrite Action = "overwrite" // changed by the user, replaced because of --force
)

// Outcome is the action taken for one file.
type Outcome struct {
	Path   string
	Action Action
	// Foreign is set for a file kept because it was there before and
	// converge never wrote it (rather than changed since converge did).
	Foreign bool
}

// writeFiles writes files under dir following the re-run rules:
//
//   - a missing file is created;
//   - a file that already holds the content is left as is;
//   - a file whose content still has the hash recorded in the manifest
//     (nobody changed it since converge wrote it) is updated;
//   - any other file (changed by the user, or never written by converge) is
//     kept, unless force, which overwrites it.
//
// m.Files is updated with the hash of every file converge now vouches for.
func writeFiles(dir string, files []File, m *manifest, force bool) ([]Outcome, error) {
	out := make([]Outcome, 0, len(files))
	for _, f := range files {
		p := filepath.Join(dir, filepath.FromSlash(f.Path))
		want := hash(f.Content)
		cur, err := os.ReadFile(p)
		var action Action
		switch {
		case errors.Is(err, fs.ErrNotExist):
			action = ActionCreate
		case err != nil:
			return out, err
		case f.CreateOnly:
			action = ActionUnchanged // what converge wrote once now belongs to go mod tidy and the user
		case bytes.Equal(cur, f.Content):
			action = ActionUnchanged
		case m.Files[f.Path] == hash(cur):
			action = ActionUpdate
		case force:
			action = ActionOverwrite
		default:
			action = ActionKeep
		}
		switch action {
		case ActionCreate, ActionUpdate, ActionOverwrite:
			if err := writeFile(p, f.Content, f.Executable); err != nil {
				return out, err
			}
			m.Files[f.Path] = want
		case ActionUnchanged:
			if !f.CreateOnly {
				m.Files[f.Path] = want
			}
		}
		_, ours := m.Files[f.Path]
		out = append(out, Outcome{Path: f.Path, Action: action, Foreign: action == ActionKeep && !ours})
	}
	return out, nil
}

// writeFile writes b to p atomically (a temporary file renamed over p).
func writeFile(p string, b []byte, executable bool) error {
	mode := fs.FileMode(0o644)
	if executable {
		mode = 0o755
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(p), ".converge-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after a successful rename there is nothing left to remove
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), mode); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), p); err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	return nil
}

func hash(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
