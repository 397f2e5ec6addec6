"""The categories of a fact, by rule (design §13 "Categories and metadata"): the offline
provider files a fact under each listed category one of whose words it says, matched like the
owner's topics (``offline_rules.topics``: lightly stemmed, "caterer" reads "cater").

Each default category (``pipeline.owner.categories.DEFAULT_CATEGORIES``) has a short list of
words its facts tend to say; a category an owner adds is matched on its own name's words
("venues" on "venue"), so a demo's own list files facts too. A language model reads the list
and the fact instead.
"""

from __future__ import annotations

from collections.abc import Sequence

from pipeline.llm.offline_rules.topics import matches, stems

_WORDS: dict[str, tuple[str, ...]] = {
    "personal_details": ("name", "birthday", "born", "age", "lives", "live", "address", "email", "phone",
                         "nationality", "language", "moved", "hometown"),
    "family": ("daughter", "son", "wife", "husband", "partner", "mother", "father", "mom", "dad", "sister",
               "brother", "child", "children", "kids", "family", "grandmother", "grandfather", "parents"),
    "professional_details": ("works", "work", "job", "employer", "company", "manager", "engineer", "role",
                             "office", "colleague", "career", "team", "hired", "client", "studio"),
    "health": ("doctor", "allergy", "allergic", "health", "medication", "diabetes", "surgery", "hospital",
               "diet", "vegetarian", "vegan", "pregnant", "therapy"),
    "travel": ("trip", "travel", "hotel", "airport", "visa", "vacation", "holiday", "passport",
               "train"),
    "food": ("food", "restaurant", "dinner", "lunch", "breakfast", "cook", "recipe", "menu", "catering",
             "caterer", "coffee", "wine", "meal"),
    "sports": ("sport", "football", "soccer", "tennis", "running", "marathon", "gym", "yoga", "swim", "cycling",
               "basketball", "climbing"),
    "music": ("music", "band", "concert", "guitar", "piano", "song", "album", "singer", "violin"),
    "technology": ("software", "app", "website", "laptop", "computer", "code", "server", "api", "phone model",
                   "database", "ai"),
    "hobbies": ("hobby", "painting", "reading", "gardening", "photography", "knitting", "chess", "volunteer",
                "volunteered", "hiking"),
    "fashion": ("clothes", "dress", "shoes", "fashion", "style", "size", "jacket"),
    "entertainment": ("movie", "film", "series", "show", "game", "book", "novel", "theater", "podcast"),
    "milestones": ("wedding", "graduated", "graduation", "anniversary", "promotion", "retired", "engaged",
                   "married", "birth"),
    "projects": ("project", "launch", "festival", "event", "venue", "deadline", "milestone", "plan", "release",
                 "conference"),
    "finance": ("budget", "cost", "price", "invoice", "payment", "salary", "euros", "dollars", "usd", "eur",
                "loan", "rent", "paid", "funding"),
}


def categories_of(text: str, listed: Sequence[str]) -> list[str]:
    """The names of ``listed`` whose words ``text`` says, in list order."""
    said = stems(text)
    words = {name: _WORDS.get(name) or (name.replace("_", " "),) for name in listed}
    return [name for name in listed if any(matches(w, said) for w in words[name])]
