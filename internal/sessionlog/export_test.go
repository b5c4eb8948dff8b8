package sessionlog

// ScanSummary exposes the fast path of SummarizeLine, to check that the
// lines EncodeBatch writes take it.
func ScanSummary(line []byte) bool {
	_, ok := scanSummary(line)
	return ok
}

// ReadLineInfo exposes what CommittedLength reads of a line.
func ReadLineInfo(line []byte) (typ string, more int, err error) {
	li, err := readLineInfo(line)
	return li.Type, li.More, err
}
