package serde_test

import (
	"errors"
	"fmt"

	"github.com/sluice-streams/sluice/serde"
)

func Example() {
	type bill struct {
		ID     string `json:"id"`
		Amount int64  `json:"amount"`
	}
	s := serde.JSON[bill]()
	b, _ := s.Encode(bill{"b1", 42})
	fmt.Println(string(b))

	_, err := s.Decode([]byte(`{"id":`))
	fmt.Println(errors.Is(err, serde.ErrDecode))
	// Output:
	// {"id":"b1","amount":42}
	// true
}
