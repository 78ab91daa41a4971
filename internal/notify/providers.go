package notify

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"time"

	"github.com/driftless/driftless/internal/source"
)

// SignatureHeader carries the HMAC-SHA256 of a generic body:
// "sha256=" and the hex digest, keyed with the target's hmacKeyFile.
const SignatureHeader = "X-Driftless-Signature"

// GenericBody is the JSON a generic target receives.
type GenericBody struct {
	Sync      string `json:"sync"`
	Namespace string `json:"namespace"`
	Event     Event  `json:"event"`
	Reason    string `json:"reason"`
	Summary   string `json:"summary"`
	Message   string `json:"message"`
	Revision  string `json:"revision,omitempty"`
	// Subject and Author of the revision's commit, and CommitURL, its
	// web page, when known.
	Subject   string `json:"subject,omitempty"`
	Author    string `json:"author,omitempty"`
	CommitURL string `json:"commitURL,omitempty"`
	// Artifact is the address of an OCI Sync's revision:
	// oci://<host>/<path>:<tag>@sha256:<hex>.
	Artifact string    `json:"artifact,omitempty"`
	Time     time.Time `json:"time"`
	Count    int       `json:"count"`
}

// body words m for a target type.
func body(typ string, m Message) ([]byte, error) {
	switch typ {
	case TypeSlack:
		// Slack incoming webhook: a plain text message in mrkdwn.
		text := "*" + slackEscape(m.Summary) + "*"
		if m.Detail != "" {
			text += "\n" + slackEscape(m.Detail)
		}
		if c := commitLine(m); c != "" {
			if m.CommitURL != "" {
				c = "<" + m.CommitURL + "|" + slackEscape(c) + ">"
			} else {
				c = slackEscape(c)
			}
			text += "\n" + c
		}
		return json.Marshal(map[string]string{"text": text})
	case TypeTeams:
		// Teams workflow webhook ("When a Teams webhook request is
		// received"): one Adaptive Card in attachments.
		blocks := []map[string]any{{"type": "TextBlock", "text": m.Summary, "weight": "Bolder", "wrap": true}}
		if m.Detail != "" {
			blocks = append(blocks, map[string]any{"type": "TextBlock", "text": m.Detail, "wrap": true})
		}
		if c := commitLine(m); c != "" {
			if m.CommitURL != "" {
				c = "[" + c + "](" + m.CommitURL + ")"
			}
			blocks = append(blocks, map[string]any{"type": "TextBlock", "text": c, "wrap": true, "isSubtle": true})
		}
		return json.Marshal(map[string]any{
			"type": "message",
			"attachments": []map[string]any{{
				"contentType": "application/vnd.microsoft.card.adaptive",
				"content": map[string]any{
					"$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
					"type":    "AdaptiveCard",
					"version": "1.4",
					"body":    blocks,
				},
			}},
		})
	default:
		return json.Marshal(GenericBody{Sync: m.Sync.Name, Namespace: m.Sync.Namespace, Event: m.Event, Reason: m.Reason,
			Summary: m.Summary, Message: m.Detail, Revision: m.Revision, Subject: m.Subject, Author: m.Author, CommitURL: m.CommitURL,
			Artifact: m.Artifact, Time: m.Time.UTC(), Count: m.Count})
	}
}

// commitLine is "<short sha> <subject> (<author>)", "artifact <address>"
// for an OCI Sync, or "" when neither the subject nor a link is known.
func commitLine(m Message) string {
	if m.Artifact != "" {
		return "artifact " + m.Artifact
	}
	if m.Revision == "" || (m.Subject == "" && m.CommitURL == "") {
		return ""
	}
	line := source.Short(m.Revision)
	if m.Subject != "" {
		line += " " + m.Subject
	}
	if m.Author != "" {
		line += " (" + m.Author + ")"
	}
	return line
}

// slackEscape escapes the characters Slack's mrkdwn gives a meaning.
func slackEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// Sign returns the X-Driftless-Signature value of body under key.
func Sign(key, body []byte) string {
	mac := hmac.New(sha256.New, key)
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}
