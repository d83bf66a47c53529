"""Everyday chat prompts for on-policy data: templates x hand-written subjects.

Why: drafters trained only on the corpus-passage prompts of `data.build_prompts` reached a simulated
acceptance length of 1.69 on their own validation split but 1.44 on everyday questions, and vLLM
measured the same 1.45: the answers to "summarise this passage" differ from the answers to "how do
I ...". These prompts are of the everyday kind; none equals or nearly equals a held-out one
(`too_close`), so the held-out figures stay honest.

Example: ("Give me a short plan for {}.", "learning to swim") -> "Give me a short plan for learning to swim."
"""

from __future__ import annotations

import random
import re

ACTIVITIES = [
    "learning to swim", "learning to play the guitar", "saving for a holiday", "starting a vegetable garden",
    "training for a 5k run", "learning to draw", "keeping a tidy home", "cooking healthy meals on a budget",
    "learning to bake bread", "getting up early", "studying for an exam", "making new friends in a new city",
    "starting a small business", "learning to code", "reading more books", "spending less time on the phone",
    "planning a family trip", "writing a diary", "learning to knit", "taking better photos", "moving to a new flat",
    "preparing for a job interview", "learning to meditate", "drinking more water", "walking more every day",
    "learning a musical instrument", "organising a closet", "hosting a dinner party", "caring for a new puppy",
    "teaching a child to ride a bike", "learning to juggle", "cutting down on sugar", "painting a room",
    "starting a book club", "learning to sing", "cycling to work", "making a budget", "learning to dance",
    "decluttering a garage", "writing a cover letter", "planning a wedding", "learning chess", "baking cookies",
    "building a bird house", "keeping a plant alive", "running a school fundraiser", "learning to cook rice",
    "writing a short story", "giving a speech", "camping for the first time", "learning to type faster",
    "making a smoothie", "starting to lift weights", "learning about birds", "cleaning a kitchen quickly",
]
CONCEPTS = [
    "the moon", "volcanoes", "the internet", "rainbows", "earthquakes", "the heart", "electricity", "magnets",
    "the ocean tides", "dinosaurs", "clouds", "thunder", "snowflakes", "the human brain", "vaccines", "recycling",
    "the stock market", "solar panels", "the seasons", "fossils", "sound", "light", "the immune system", "bridges",
    "airplanes", "money", "time zones", "the alphabet", "maps", "calendars", "batteries", "the sun", "stars",
    "black holes", "bread yeast", "soap", "fire", "wind", "rivers", "deserts", "rainforests", "coral reefs",
    "the post office", "libraries", "elections", "taxes", "banks", "music", "memory", "dreams", "friendship",
    "kindness", "habits", "teamwork", "patience", "honesty", "the compass", "the telephone", "the printing press",
    "trains", "bicycles", "the wheel", "glaciers", "mountains", "islands", "caterpillars", "butterflies",
    "honeybees", "owls", "whales", "penguins", "sharks", "ants", "spiders", "tomatoes", "coffee", "chocolate",
]
PAIRS = [
    ("a frog", "a toad"), ("a lake", "a pond"), ("a hill", "a mountain"), ("a crocodile", "an alligator"),
    ("a rabbit", "a hare"), ("a sea", "an ocean"), ("baking", "roasting"), ("a cold", "the flu"),
    ("a town", "a city"), ("a planet", "a star"), ("a violin", "a cello"), ("a poem", "a song"),
    ("a moth", "a butterfly"), ("jam", "jelly"), ("a dolphin", "a porpoise"), ("a bank", "a credit union"),
    ("a novel", "a short story"), ("a cafe", "a restaurant"), ("a laptop", "a tablet"), ("a fruit", "a vegetable"),
    ("a river", "a stream"), ("a mug", "a cup"), ("tea", "coffee"), ("walking", "running"), ("a job", "a career"),
    ("a bee", "a wasp"), ("a lion", "a tiger"), ("a boat", "a ship"), ("a doctor", "a nurse"), ("sleet", "hail"),
]
TRIPS = [
    "a beach holiday", "a weekend in a big city", "a camping trip in the forest", "a ski trip", "a long train ride",
    "a visit to my grandparents", "a school field trip", "a business trip", "a summer festival", "a road trip",
    "a hiking day", "a week at a lake house", "a winter trip to the north", "a picnic in the park", "a boat trip",
    "a first flight abroad", "a cycling tour", "a sleepover at a friend's house", "a day at the zoo", "a music camp",
]
MESSAGES = [
    "inviting a neighbour to dinner", "thanking a friend for a birthday gift", "asking my landlord to fix the heating",
    "congratulating a colleague on a promotion", "apologising for missing a meeting", "welcoming a new team member",
    "asking a teacher for more time on homework", "inviting friends to a picnic", "saying goodbye to a coworker who is leaving",
    "reminding my team about a deadline", "asking a friend to feed my cat", "thanking a nurse", "wishing a friend good luck",
    "inviting my family to a concert", "asking a shop about a late order", "cheering up a sick friend",
    "asking for a day off", "thanking a host after a dinner", "inviting classmates to a study group",
    "telling a friend about my new job", "asking a neighbour to keep the music down", "welcoming guests to a party",
]
HABITS = [
    "drink coffee", "keep a diary", "go to the gym", "collect stamps", "travel", "watch old movies", "play video games",
    "grow their own food", "ride bicycles", "bake at home", "go fishing", "learn new languages", "volunteer",
    "visit museums", "listen to podcasts", "go for walks", "take naps", "make lists", "sing in choirs", "write letters",
    "climb mountains", "keep fish", "do puzzles", "read the news", "wake up early",
]
SCENES = [
    "a busy market", "a quiet library", "a snowy evening", "a summer afternoon at the beach", "a rainy street",
    "a farm at sunrise", "a train station at rush hour", "a cozy kitchen", "a forest in autumn", "a city at night",
    "a school playground", "a small bakery", "a thunderstorm", "a garden in spring", "a lazy Sunday",
    "a football match", "a birthday party", "a mountain lake", "a crowded bus", "a first day at school",
]
STORY_SUBJECTS = [
    "a lost kitten", "a brave little mouse", "a robot who learns to paint", "a dragon who is afraid of fire",
    "a talking tree", "a girl who finds a map", "a boy and his kite", "a lighthouse keeper", "a friendly ghost",
    "a lost key", "a magic teapot", "a tiny astronaut", "a baker's secret recipe", "a snowman in summer",
    "two friends on a road trip", "a cat who wants to fly", "a forgotten birthday", "an old piano", "a lonely whale",
    "a missing sock", "a new neighbour", "a rainy football match", "a clock that runs backwards", "a clever fox",
]
TASKS = [
    "boil an egg", "tie a tie", "clean a window without streaks", "change a flat tyre", "make a paper plane",
    "fold a shirt", "write a thank-you card", "plan a weekly menu", "remove a coffee stain", "set up a fish tank",
    "make a cup of hot chocolate", "wrap a present", "sew on a button", "make a simple salad", "pick a good watermelon",
    "stop a dripping tap", "choose a good book", "start a conversation at a party", "keep bread fresh", "make pancakes fluffy",
    "plant tulip bulbs", "wash a wool sweater", "keep a cat off the table", "make my room feel bigger", "pack a suitcase",
    "make a to-do list that works", "cook pasta", "get rid of fruit flies", "make iced tea", "clean a bike chain",
    "write a good birthday card", "teach a dog to sit", "save energy at home", "make friends at work", "find a hobby",
    "remember names better", "cool down a hot room", "sharpen a pencil without a sharpener", "make a simple soup",
    "keep my desk tidy", "organise my photos", "make a kite", "choose running shoes", "say no politely",
    "write a shopping list", "care for a cactus", "make toast without a toaster", "calm down before a test",
]
GOALS = [
    "a productive morning", "better sleep", "a happy family life", "staying calm", "learning faster",
    "a healthy heart", "saving money", "a clean home", "good posture", "making friends", "working from home",
    "keeping focus", "eating well", "strong teeth", "a good mood", "staying organised", "being a good listener",
]
TEMPLATES = {
    "ACTIVITY": ["Give me a short plan for {}.", "Is {} hard? What helps?", "Write a short poem about {}.",
                 "What is a good first week of {}?", "How can a busy person fit in {}?", "What are some tips for {}?",
                 "What mistakes do beginners make when {}?",
                 "How do I get better at {}?", "What are the benefits of {}?", "Write a short motivational message about {}.",
                 "What do I need for {}?", "How long does it take to get good at {}?"],
    "CONCEPT": ["Explain {} to a ten-year-old.", "What is special about {}?", "What should I know about {}?",
                "Give me three interesting facts about {}.", "Why does it help to know about {}?",
                "Describe {} in a few sentences.", "Write a short poem about {}.", "What would a child want to know about {}?",
                "Tell me something surprising about {}.", "Write a short paragraph about {}.", "Tell me a fun fact about {}.",
                "How would you explain {} to a friend?", "What are common myths about {}?", "Write a riddle about {}.",
                "What is the history of {} in a few sentences?"],
    "TASK": ["How do I {}?", "What is the easiest way to {}?", "Explain step by step how to {}.", "Can you help me {}?",
             "What do I need to {}?"],
    "PAIR": ["What is the difference between {} and {}?", "How can I tell {} from {}?", "Compare {} and {} in a few sentences."],
    "TRIP": ["What should I pack for {}?", "How do I get ready for {}?", "Give me a checklist for {}."],
    "MESSAGE": ["Write a friendly message {}.", "Write a short polite email {}.", "Help me write a note {}."],
    "HABIT": ["Why do people {}? Give a few reasons.", "What are the good and bad sides of the wish to {}?",
              "Is it a good idea to {} every day?"],
    "SCENE": ["Describe {}.", "Write a few sentences about {}.", "What does {} sound and smell like?"],
    "STORY": ["Write a short story about {}.", "Tell a bedtime story about {}.", "Write the first paragraph of a story about {}."],
    "GOAL": ["What are three good habits for {}?", "Give me five tips for {}.", "What should I do every day for {}?"],
}
SUBJECTS = {"TASK": TASKS, "ACTIVITY": ACTIVITIES, "CONCEPT": CONCEPTS, "PAIR": PAIRS, "TRIP": TRIPS, "MESSAGE": MESSAGES,
            "HABIT": HABITS, "SCENE": SCENES, "STORY": STORY_SUBJECTS, "GOAL": GOALS}


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z]+", text.lower()))


def too_close(prompt: str, others: list[str], limit: float = 0.5) -> bool:
    """True if `prompt` shares more than `limit` of its words (Jaccard) with one of `others`.

    Example: "What are three good habits for better sleep?" vs the held-out "What are three good
    habits for staying healthy?": 6 shared words of 10 -> 0.6 -> too close."""
    mine = _words(prompt)
    return any(len(mine & w) / max(1, len(mine | w)) > limit for w in map(_words, others))


def all_chat_prompts(exclude: list[str]) -> list[str]:
    """Every template filled with every subject of its kind, minus those too close to `exclude`."""
    out = []
    for kind, templates in TEMPLATES.items():
        for template in templates:
            for subject in SUBJECTS[kind]:
                prompt = template.format(*subject) if isinstance(subject, tuple) else template.format(subject)
                if not too_close(prompt, exclude):
                    out.append(prompt)
    return out


def chat_prompts(n: int, exclude: list[str], seed: int = 0) -> list[str]:
    """`n` distinct everyday prompts (fewer if there are not that many), in a seeded random order."""
    prompts = all_chat_prompts(exclude)
    random.Random(seed).shuffle(prompts)
    return prompts[:n]
