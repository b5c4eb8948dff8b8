package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/panto-dev/panto/store/objstore"
)

func main() {
	ctx := context.Background()
	t0 := time.Now()
	s, err := objstore.Open(ctx, os.Args[1], objstore.WithEndpoint(os.Args[2]))
	if err != nil {
		panic(err)
	}
	fmt.Println("open", time.Since(t0))
	t0 = time.Now()
	_, err = s.Sessions(ctx)
	fmt.Println("sessions", time.Since(t0), err)
	files, _ := filepath.Glob("/tmp/gencat/*.jsonl")
	var mu sync.Mutex
	var total time.Duration
	t0 = time.Now()
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for _, f := range files {
		data, _ := os.ReadFile(f)
		id := strings.TrimSuffix(filepath.Base(f), ".jsonl")
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			t := time.Now()
			if err := s.AppendRaw(ctx, id, 0, "", data); err != nil {
				panic(err)
			}
			mu.Lock()
			total += time.Since(t)
			mu.Unlock()
		}()
	}
	wg.Wait()
	fmt.Println("append all", time.Since(t0), "avg", total/time.Duration(len(files)))
}
