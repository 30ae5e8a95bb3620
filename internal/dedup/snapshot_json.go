package dedup

import (
	"strconv"

	"github.com/tulip-temporal/tulip/internal/jsonenc"
)

// A log's snapshot is written at every continue-as-new and thread save,
// on replay too: records by the thousand. It is written without
// reflection, byte for byte what an encoding/json Encoder with HTML
// escaping off writes (TestSnapshotJSON holds it to one). A record's raw
// values (its result, a near miss's values) are JSON by construction:
// decoded from a payload or a snapshot, or written by the log.

// appendSnapshot appends s's JSON.
func appendSnapshot(b []byte, s *snapshot) []byte {
	b = append(b, `{"version":`...)
	b = strconv.AppendInt(b, int64(s.Version), 10)
	b = append(b, `,"responses":`...)
	b = strconv.AppendInt(b, int64(s.Responses), 10)
	b = append(b, `,"records":`...)
	if s.Records == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range s.Records {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendRecord(b, &s.Records[i])
		}
		b = append(b, ']')
	}
	return append(b, '}')
}

func appendRecord(b []byte, r *Record) []byte {
	str := jsonenc.AppendStringNoHTML
	b = append(b, `{"seq":`...)
	b = strconv.AppendInt(b, int64(r.Seq), 10)
	b = append(b, `,"tool":`...)
	b = str(b, r.Tool)
	b = append(b, `,"arguments":`...)
	b = str(b, r.Arguments)
	b = append(b, `,"response":`...)
	b = strconv.AppendInt(b, int64(r.Response), 10)
	if r.Run != "" {
		b = append(b, `,"run":`...)
		b = str(b, r.Run)
	}
	b = append(b, `,"turn":`...)
	b = strconv.AppendInt(b, int64(r.Turn), 10)
	b = append(b, `,"call_id":`...)
	b = str(b, r.CallID)
	b = append(b, `,"origin":`...)
	b = str(b, string(r.Origin))
	if len(r.Result) > 0 {
		b = append(b, `,"result":`...)
		b = jsonenc.AppendRawNoHTML(b, r.Result)
	}
	if r.Error != nil {
		b = append(b, `,"error":{"type":`...)
		b = str(b, r.Error.Type)
		b = append(b, `,"message":`...)
		b = str(b, r.Error.Message)
		b = append(b, '}')
	}
	if r.ServedFrom != nil {
		b = append(b, `,"served_from":`...)
		b = strconv.AppendInt(b, int64(*r.ServedFrom), 10)
	}
	if r.Relation != "" {
		b = append(b, `,"relation":`...)
		b = str(b, string(r.Relation))
	}
	if r.Key != "" {
		b = append(b, `,"key":`...)
		b = str(b, r.Key)
	}
	if r.ArgsHash != "" {
		b = append(b, `,"args_hash":`...)
		b = str(b, r.ArgsHash)
	}
	if r.Holder != "" {
		b = append(b, `,"holder":`...)
		b = str(b, r.Holder)
	}
	if r.ResultIn != nil {
		b = append(b, `,"result_in":`...)
		b = strconv.AppendInt(b, int64(*r.ResultIn), 10)
	}
	if r.NearMiss != nil {
		b = append(b, `,"near_miss":`...)
		b = AppendNearMiss(b, r.NearMiss, false)
	}
	if u := r.Unknown; u != nil {
		b = append(b, `,"unknown":{"cause":`...)
		b = str(b, u.Cause)
		b = append(b, `,"checks":`...)
		b = strconv.AppendInt(b, int64(u.Checks), 10)
		if u.Retries != 0 {
			b = append(b, `,"retries":`...)
			b = strconv.AppendInt(b, int64(u.Retries), 10)
		}
		if u.Holds != 0 {
			b = append(b, `,"holds":`...)
			b = strconv.AppendInt(b, int64(u.Holds), 10)
		}
		b = append(b, `,"resolution":`...)
		b = str(b, u.Resolution)
		b = append(b, '}')
	}
	return append(b, '}')
}

// AppendNearMiss appends nm's JSON as encoding/json writes it, with HTML
// escaping on (json.Marshal: a run's trace) or off (an Encoder so set: a
// snapshot).
func AppendNearMiss(b []byte, nm *NearMiss, escapeHTML bool) []byte {
	str, raw := jsonenc.AppendStringNoHTML, jsonenc.AppendRawNoHTML
	if escapeHTML {
		str, raw = jsonenc.AppendString, jsonenc.AppendRaw
	}
	b = append(b, `{"record":`...)
	b = strconv.AppendInt(b, int64(nm.Record), 10)
	b = append(b, `,"call_id":`...)
	b = str(b, nm.CallID)
	b = append(b, `,"reason":`...)
	b = str(b, string(nm.Reason))
	if len(nm.Differences) > 0 {
		b = append(b, `,"differences":[`...)
		for i := range nm.Differences {
			d := &nm.Differences[i]
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"path":`...)
			b = str(b, d.Path)
			if len(d.Was) > 0 {
				b = append(b, `,"was":`...)
				b = raw(b, d.Was)
			}
			if len(d.Now) > 0 {
				b = append(b, `,"now":`...)
				b = raw(b, d.Now)
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if nm.Distance != 0 {
		b = append(b, `,"distance":`...)
		b = strconv.AppendInt(b, int64(nm.Distance), 10)
	}
	return append(b, '}')
}
